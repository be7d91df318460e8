"""Block Kit rendering stays inside Slack's limits and keeps what a reader needs."""

from __future__ import annotations

import re
from pathlib import Path

import bot.slack
from bot.slack.emoji import EMOJI_GLYPHS
from bot.slack.thread_blocks import finding_message, progress_message, verdict_message
from commands.findings import Evidence, Finding
from commands.operation import OperationResult
from tests.slack_fake.blockkit import validate_blocks


def test_long_output_is_trimmed_with_a_note_and_stays_valid() -> None:
    evidence = Evidence("find / -type f", 0, "x" * 3900 + "<script>&", 1.0)
    text, blocks = finding_message(Finding("extra-files", "fail", "many files", evidence))
    assert validate_blocks(blocks) == []
    sections = [block["text"]["text"] for block in blocks if block["type"] == "section"]
    assert all(len(section) <= 3000 for section in sections)
    # one long line: its middle cut, and the note says where the whole of it is (the thread's details file)
    assert "…" in sections[1] and "<script>&" not in sections[1] and "&lt;script&gt;&amp;" in sections[1]
    assert "the whole command and output are in the details file" in blocks[-1]["elements"][0]["text"]
    assert text.startswith("extra-files: fail")


def test_many_long_lines_are_still_trimmed_to_one_section_with_a_note() -> None:
    evidence = Evidence("find / -type f", 0, "\n".join("y" * 400 for _ in range(40)), 1.0)
    _, blocks = finding_message(Finding("extra-files", "fail", "many files", evidence))
    assert validate_blocks(blocks) == []
    code = blocks[1]["text"]["text"]
    assert len(code) <= 3000 and "… 30 more lines" in code


def test_backticks_in_output_cannot_close_the_code_block() -> None:
    evidence = Evidence("cat x", 0, "before ``` after", 0.1)
    _, blocks = finding_message(Finding("cmdline", "pass", "ok", evidence))
    code = blocks[1]["text"]["text"]
    assert code.startswith("```") and code.endswith("```")
    assert code.count("```") == 2


def test_verdict_of_many_checks_fits_in_fifty_blocks() -> None:
    checks = [Finding(f"file:f{i}.py", "pass", "identical " * 20, Evidence("c", 0, "o", 0.0)) for i in range(300)]
    result = OperationResult("op-1", "verify", "ct129", "2026-01-01T00:00:00Z", 1.0, checks)
    _, blocks = verdict_message(result, "U1", "pre")
    assert validate_blocks(blocks) == []
    _, progress = progress_message("verify", "ct129", "U1", [c.name for c in checks], checks[:10])
    assert validate_blocks(progress) == []


def test_every_emoji_code_the_renderers_use_has_a_plain_text_glyph() -> None:
    """The demo prints threads as plain text: no ':pencil2:' left for a reader to decode."""
    renderers = [*Path(bot.slack.__path__[0]).glob("*blocks.py"), Path(bot.slack.__path__[0]) / "emoji.py"]
    assert len(renderers) >= 9
    used = {code for path in renderers for code in re.findall(r":[a-z0-9_]+:", path.read_text())}
    assert used - set(EMOJI_GLYPHS) == set()
