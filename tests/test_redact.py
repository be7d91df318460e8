"""Secrets never survive into evidence, summaries or posted text."""

from __future__ import annotations

import pytest

from commands.findings import Evidence
from commands.redact import redact


@pytest.mark.parametrize(
    ("raw", "secret"),
    [("python -m sglang --api-key sk-abcdefghijklmnopqrstu --port 1", "sk-abcdefghijklmnopqrstu"),
     ("server --api-key=hunter2hunter2", "hunter2hunter2"),
     ("run --hf-token hf_abcdefghijklmnopqrstuv", "hf_abcdefghijklmnopqrstuv"),
     ("--password s3cr3t!", "s3cr3t!"),
     ("Authorization: Bearer abcdefghijklmnop123", "abcdefghijklmnop123"),
     ("token xoxb-1234-5678-abcdefghij posted", "xoxb-1234-5678-abcdefghij"),
     ("OPENAI_API_KEY=abc123def456 python x", "abc123def456"),
     ("fetch https://admin:pa55word@10.0.0.1/x", "pa55word"),
     ("a\x00--api-key\x00nul-separated-secret\x00b", "nul-separated-secret")],
)
def test_secret_is_masked(raw: str, secret: str) -> None:
    assert secret not in redact(raw)
    assert "[REDACTED]" in redact(raw)


def test_ordinary_flags_are_left_alone() -> None:
    text = "--speculative-algorithm NEXTN --port 30000 --model-path /models/x"
    assert redact(text) == text


def test_evidence_is_redacted_when_created() -> None:
    evidence = Evidence.of("launch --api-key abcdefgh12345", 0, "token=xoxp-1111-2222-33334444", 0.1)
    assert "abcdefgh12345" not in evidence.command
    assert "xoxp-1111-2222-33334444" not in evidence.output
