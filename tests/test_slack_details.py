"""A long script or a raw /proc line is not pasted into every reply: each check's reply keeps a short form,
and the thread ends with one details file holding the whole of each (issue 25). The real bolt app, signed
slash commands over HTTP, the recording fake of Slack's Web API (files.uploadV2 included), a real host."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml

from bot.demo.host import DemoHost
from bot.slack.app import BotContext, build_app
from bot.slack.thread_blocks import INLINE_LINE_CHARS, details_file, finding_message
from commands.findings import Evidence, Finding
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.slack_fake.blockkit import validate_blocks
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import slash_command_body

SECRET = "details-secret"
CHANNEL = "C0OPS"
STAT = "24562 (python) S 1 24562 24562 0 -1 4194560 " + " ".join(str(n) for n in range(200, 260))


@pytest_asyncio.fixture(loop_scope="session")
async def rig(seeded_host: DemoHost, tmp_path: Path) -> AsyncIterator[tuple[str, FakeSlack]]:
    inventory = parse_inventory(yaml.safe_dump(seeded_host.inventory()), "inventory.yml")
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        app = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, signing_secret=SECRET,
                        api_url=slack.api_url)
        try:
            async with serving(app) as url:
                yield url, slack
        finally:
            audit.close()


async def test_a_verify_thread_cuts_long_scripts_and_raw_proc_lines_into_one_details_file(
        rig: tuple[str, FakeSlack]) -> None:
    url, slack = rig
    ack = await slack.deliver(url, slash_command_body("/verify", "ct129", "U0ALICE", CHANNEL, slack.response_url(),
                                                      "t"))
    assert ack.status_code == 200
    await slack.wait_until(lambda: any(f.completed for f in slack.files.values()), timeout=60,
                           what="the details file")
    [parent] = [m for m in slack.messages_in(CHANNEL) if not m.is_reply]
    replies = {reply.text.split(":")[0]: reply for reply in slack.thread(CHANNEL, parent.ts)}
    # stale-process runs four commands, one of them `cat /proc/PID/stat`: its reply shows two and says where the rest is
    stale = json.dumps(replies["stale-process"].blocks, ensure_ascii=False)
    assert "$ … 2 more lines of script" in stale and "/proc/$MAINPID/stat" not in stale
    assert "the whole command and output are in the details file at the end of this thread" in stale
    code = [b["text"]["text"] for b in replies["stale-process"].blocks or [] if b["type"] == "section"][1]
    assert all(len(line) <= INLINE_LINE_CHARS for line in code.strip("`").splitlines())
    # a short one stays whole, with no note
    sha = json.dumps(replies["file"].blocks)
    assert "```$ sha256sum -- " in sha and "details file" not in sha
    [details] = [f for f in slack.files.values() if f.completed]
    assert details.thread_ts == parent.ts and details.filename.startswith("details-op-")
    text = (details.content or b"").decode()
    assert "--- stale-process · pass · PID " in text and "[REDACTED]" not in text
    pid = text.split("--- stale-process · pass · PID ", 1)[1].split()[0]
    assert f"# cat /proc/{pid}/stat /proc/uptime\n{pid} (python) " in text  # the raw line, whole
    assert "--- file:" not in text  # only what a reply showed cut
    summary = slack.thread(CHANNEL, parent.ts)[-1]
    assert summary.text.startswith("Summary of operation")  # the file comes after the summary
    assert slack.warnings == []


def test_a_short_evidence_is_shown_whole_and_needs_no_details() -> None:
    evidence = Evidence("GET http://127.0.0.1:30000/health", 0, "HTTP 200\nok", 0.1)
    finding = Finding("health", "pass", "HTTP 200", evidence)
    _, blocks = finding_message(finding)
    assert "GET http://127.0.0.1:30000/health\nHTTP 200\nok" in blocks[1]["text"]["text"]
    assert "details file" not in json.dumps(blocks)
    assert details_file([finding]) is None


def test_a_raw_proc_line_is_cut_in_its_middle_and_whole_in_the_details() -> None:
    finding = Finding("stale-process", "warn", "older than its files",
                      Evidence("cat /proc/24562/stat /proc/uptime", 0, f"{STAT}\n1234.5 678.9", 0.01))
    _, blocks = finding_message(finding)
    assert validate_blocks(blocks) == []
    code = blocks[1]["text"]["text"]
    assert STAT not in code and STAT[:40] in code and STAT[-40:] in code and "…" in code
    assert "details file" in blocks[2]["elements"][0]["text"]
    details = details_file([finding]) or ""
    assert STAT in details and "$ cat /proc/24562/stat /proc/uptime" in details
    assert details.startswith("--- stale-process · warn · older than its files\n")
