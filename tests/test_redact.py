"""Secrets never survive into evidence, summaries or posted text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from commands.findings import Evidence, Finding, trim
from commands.redact import redact, redact_data


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


CORPUS = yaml.safe_load((Path(__file__).parent / "recorded" / "secret_corpus.yml").read_text())


def leaked(secret: str, output: str) -> bool:
    """A secret with spaces leaks by any of its words too (``correct horse …`` half-masked is a leak), and
    any secret by its last 16 characters (``ghp_`` masked and the 36 characters after it shown is a leak)."""
    pieces = [secret, *(word for word in secret.split() if len(word) >= 5), *([secret[-16:]] if len(secret) >= 24
                                                                              else [])]
    return any(piece in output for piece in pieces)


def test_the_corpus_has_at_least_60_shapes_in_every_syntax() -> None:
    assert len(CORPUS) >= 60
    kinds = {entry["shape"].split()[0] for entry in CORPUS}
    assert {"yaml", "ini", "json", "env", "shell", "url", "header", "pem", "diff"} <= kinds


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["shape"] for entry in CORPUS])
def test_every_corpus_shape_is_masked_everywhere_evidence_goes(entry: dict[str, str]) -> None:
    text, secret = entry["text"], entry["secret"]
    assert not leaked(secret, redact(text))
    evidence = Evidence.of(text, 0, f"cat /etc/app.conf\n{text}", 0.1)
    finding = Finding("probe", "fail", f"the reply was:\n{text}", evidence, {"reply": text, "body": {"k": text}})
    assert not leaked(secret, finding.summary)  # renderers read it directly
    assert not leaked(secret, json.dumps(finding.to_json(), ensure_ascii=False))
    assert not leaked(secret, json.dumps(redact_data({"nested": [text, {"text": text}]}), ensure_ascii=False))


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["shape"] for entry in CORPUS])
def test_corpus_shapes_behind_diff_prefixes_are_masked(entry: dict[str, str]) -> None:
    for prefix in "+- ":
        shown = "\n".join(prefix + line for line in entry["text"].split("\n"))
        assert not leaked(entry["secret"], redact(shown))


def test_a_removed_diff_line_keeps_its_shape() -> None:
    assert redact('-db_password = "hunter2"') == '-db_password = "[REDACTED]"'


@pytest.mark.parametrize("text", [
    "sha256sum -- /root/a.py\n3bb1a99ba95f0c1e2d3f4a5b6c7d8e9f00112233445566778899aabbccddeeff  /root/a.py",
    "cp -p -- /a/b /a/c", "find /x -maxdepth 0 -printf '%p\\t%s\\n'", '"max_tokens": 8', "KeyringMode=private",
    "MainPID=4122\nInvocationID=ff5d1f39aa0b4c5d8e9f001122334455\nNRestarts=0",
    "sglang  RUNNING   pid 4122, uptime 0:00:05", "http://127.0.0.1:30000/health",
    "--speculative-algorithm NEXTN --port 30000 --model-path /models/x",
    '{"sha256": "urlsafe-b64-Xk3dQeZl0v0", "size": 81}', "password: ${DB_PASSWORD}",
])
def test_ordinary_evidence_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_structured_paths_under_secret_names_survive() -> None:
    """A restore plan stores file names → paths; ``server.key`` names a file, not a secret."""
    data = {"files": {"server.key": "/etc/ssl/server.key"}, "password": "hunter2", "pass": 3}
    assert redact_data(data) == {"files": {"server.key": "/etc/ssl/server.key"}, "password": "[REDACTED]",
                                 "pass": 3}


def test_trimming_cuts_at_line_ends_so_no_half_secret_is_left() -> None:
    lines = [f"line {i} filler filler filler" for i in range(400)]
    lines[100] = "password: " + "Q" * 20 + "-trim-secret"
    text = trim("\n".join(lines), 3000)
    assert all(line in lines or "trimmed" in line or line == "" for line in text.split("\n"))


# One line as long as the diff a restore reads (DIFF_LIMIT), built to make a backtracking regex try every
# split of its blanks or every start: with the patterns of four detect-secrets plugins `password` + 2,000
# spaces took 36 s (cubic) and 200 KB of `https://x` 11 s (quadratic); each now takes well under a second,
# so this test finishes within its timeout only while every rule stays linear.
ADVERSARIAL_LINES = {
    "password then blanks": "password" + " " * 200_000 + "x",
    "iam key then tabs": "ibm_cloud_iam_api_key" + "\t" * 200_000 + "=x",
    "npm registry prefixes": "://" * 66_000,
    "url schemes": "https://aaaaaaaaa" * 11_700,
    "program names": "mysql mongosh redis-cli curl " * 6_900,
    "netrc words": "login x machine y " * 11_000,
    "quotes never closed": "secret '" + "a" * 200_000,
    "xml never closed": "<password a='b'>" + "a" * 200_000,
    "pgpass fields": "a:1:" * 50_000,
    "continuations": "--token x\\\n" * 18_000,
    "pem body lines": "\n".join(["QQ"] * 66_000) + "\n-----END RSA PRIVATE KEY-----",
    "secret keys alone": "password:\n" * 20_000,
    "lists never closed": '"password": [' * 15_000,
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ADVERSARIAL_LINES)
def test_long_adversarial_lines_are_masked_in_linear_time(name: str) -> None:
    text = ADVERSARIAL_LINES[name]
    masked = redact(text)
    assert masked.count("\n") <= text.count("\n")  # a whole answer came back, lines kept


def test_secret_keyed_values_starting_with_a_slash_are_masked_but_file_paths_kept() -> None:
    data = {"password": "/Jslash-start-6060", "api_key": "/x/y", "token": ["/t0k", "x"],
            "files": {"server.key": "/etc/ssl/server.key"}}
    assert redact_data(data) == {"password": "[REDACTED]", "api_key": "[REDACTED]",
                                 "token": ["[REDACTED]", "[REDACTED]"],
                                 "files": {"server.key": "/etc/ssl/server.key"}}
