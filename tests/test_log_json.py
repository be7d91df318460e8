"""PROOFBOT_LOG_FORMAT: one JSON object per line naming the operation and host its task works on (set by the
operation's own audit writes), human text by default; a secret in a message or a traceback is masked in both."""

from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.logs import FORMAT_ENV, configure_logging
from commands.errors import UsageError
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.log import audit_log
from commands.vocabulary import Operation

# The tests that count every line the root logger writes run in an event loop of their own: in the session's
# loop a timer or connection another module left behind (say asyncssh's INFO "Connection lost" of a torn-down
# lab, queued while sync tests ran) fires at the test's first await, one more line than it made.
OWN_LOOP = pytest.mark.asyncio(loop_scope="function")

SECRET = "sk-proj-Q8vN3xT5wY7zA9bC1dE2fG4hJ6kL8mN0pQ2rS4tU6vW8xY0z"  # an OpenAI key's shape
SAID = f"probe sent with --api-key {SECRET} to the host"


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[io.StringIO, pytest.MonkeyPatch]]:
    gc.collect()  # what earlier tests left to the collector ("Task was destroyed but it is pending!") logs now
    root = logging.getLogger()
    kept, level = list(root.handlers), root.level
    out = io.StringIO()
    yield out, monkeypatch
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in kept:
        root.addHandler(handler)
    root.setLevel(level)


async def _an_operation_logs(store: AuditStore, operation_id: str, host: str) -> None:
    await audit_log(store, Operation.VERIFY, operation_id, host, "slack:U0ALICE").requested(Origin.local_user())
    logging.getLogger("proofbot.test").warning(SAID)
    try:
        raise RuntimeError(f"ssh said: password={SECRET}")
    except RuntimeError:
        logging.getLogger("proofbot.test").exception("could not check")


@OWN_LOOP
async def test_json_lines_name_each_task_s_operation_and_host_and_mask_secrets(
        logs: tuple[io.StringIO, pytest.MonkeyPatch], tmp_path: Path) -> None:
    out, monkeypatch = logs
    monkeypatch.setenv(FORMAT_ENV, "json")
    configure_logging(stream=out)
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        logging.getLogger("proofbot.test").info("before any operation")
        await asyncio.gather(_an_operation_logs(store, "op-1", "ct129"), _an_operation_logs(store, "op-2", "ct130"))
    finally:
        store.close()
    lines = out.getvalue().splitlines()
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert len(entries) == 5
    first, *rest = entries
    assert first["event"] == "before any operation" and first["operation_id"] is None and first["host"] is None
    assert {(e["operation_id"], e["host"]) for e in rest} == {("op-1", "ct129"), ("op-2", "ct130")}
    said = [e for e in rest if e["level"] == "warning"]
    assert len(said) == 2 and all("[REDACTED]" in e["event"] and "probe sent with" in e["event"] for e in said)
    failed = [e for e in rest if e["level"] == "error"]
    assert all("RuntimeError" in e["exception"] and "[REDACTED]" in e["exception"] for e in failed)
    assert {"ts", "level", "logger", "event", "operation_id", "host"} <= set(first)
    assert SECRET not in out.getvalue()
    assert SECRET[8:30] not in out.getvalue()


@OWN_LOOP
async def test_text_stays_the_default_names_the_operation_and_masks_secrets(
        logs: tuple[io.StringIO, pytest.MonkeyPatch], tmp_path: Path) -> None:
    out, monkeypatch = logs
    monkeypatch.delenv(FORMAT_ENV, raising=False)
    configure_logging(stream=out)
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        await asyncio.create_task(_an_operation_logs(store, "op-3", "ct129"))
    finally:
        store.close()
    text = out.getvalue()
    assert not text.lstrip().startswith("{")
    assert "WARNING proofbot.test: probe sent with --api-key [REDACTED]" in text
    assert "[operation op-3 on ct129]" in text
    assert "Traceback" in text and "password=[REDACTED]" in text
    assert SECRET not in text


def test_an_unknown_format_is_refused_with_the_choices(logs: tuple[io.StringIO, pytest.MonkeyPatch]) -> None:
    out, monkeypatch = logs
    monkeypatch.setenv(FORMAT_ENV, "yaml")
    with pytest.raises(UsageError) as refused:
        configure_logging(stream=out)
    assert "PROOFBOT_LOG_FORMAT='yaml'" in refused.value.message and "text, json" in refused.value.hint
