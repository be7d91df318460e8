"""Redaction done once per text still masks everything (issue 27's CPU cut): a finding's ``to_json`` redacts it
whole, so a host's result and a fleet's object, which no longer walk their findings again, leak nothing; the
audit log's last gate masks details a writer already made plain; ``--json`` is the same data on a pipe (one
line, json's C encoder) as at a terminal (indented)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from bot.cli.fleet_view import fleet_json
from bot.cli.output import json_text
from commands.findings import Evidence, Finding, NextStep
from commands.operation import OperationResult
from commands.store.db import AuditStore
from commands.store.events import append_event, plain
from commands.verify.fleet import FleetResult
from commands.vocabulary import Operation
from tests.test_redact import CORPUS, leaked

# The corpus shapes that stand alone on one line (a name, a command, an argument can hold them).
ONE_LINE = [entry for entry in CORPUS if "\n" not in entry["text"]][:12]


def _fleet_holding(text: str) -> FleetResult:
    """A fleet whose every text a host or a check can fill holds ``text``; the evidence built directly, not by
    ``Evidence.of`` (a result read back from the log, a Slack thread's): nothing redacted it yet."""
    evidence = Evidence(text, 1, f"out\n{text}\n", 0.1)  # each text whole, as the corpus is masked (not mid-line)
    finding = Finding(text, "fail", text, evidence, {"reply": text, "nested": [{"text": text}]},
                      NextStep(text, Operation.RESTORE, ("ct129", text), cli_flags=(text,)))
    result = OperationResult("op-h", Operation.VERIFY, "ct129", "2026-01-01T00:00:00.000Z", 0.1, [finding],
                             extra={"note": text})
    return FleetResult("op-f", Operation.VERIFY, text, "2026-01-01T00:00:00.000Z", 0.2, [result])


@pytest.mark.parametrize("entry", ONE_LINE, ids=[entry["shape"] for entry in ONE_LINE])
def test_a_fleets_json_leaks_no_secret_from_any_field(entry: dict[str, str]) -> None:
    fleet = _fleet_holding(entry["text"])
    result = fleet.results[0]
    for document in (fleet_json(fleet, without_backup={"ct129": entry["text"]}), result.to_json(),
                     result.checks[0].to_json(), result.checks[0].to_event()):
        assert not leaked(entry["secret"], json.dumps(document, ensure_ascii=False)), document


async def test_the_audit_logs_last_gate_masks_details_already_made_plain(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        secret = "sk-abcdefghijklmnopqrstu"
        details = plain({"password": "hunter2hunter2", "command": f"serve --api-key {secret}"})
        event = await store.write(lambda db: append_event(db, "check", operation_id="op-x", details=details))
        stored = await store.read(lambda conn: conn.execute("SELECT details FROM events WHERE id = ?",
                                                            [event.id]).fetchone()[0])
    finally:
        store.close()
    assert "hunter2hunter2" not in stored and secret not in stored
    assert json.loads(stored) == event.details == {"password": "[REDACTED]", "command": "serve --api-key [REDACTED]"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_json_is_the_same_data_on_a_pipe_and_at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    document = fleet_json(_fleet_holding("ünïcode ✓ plain text"))
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    piped = json_text(document)
    monkeypatch.setattr(sys, "stdout", _Terminal())
    shown = json_text(document)
    assert "\n" not in piped and shown.startswith('{\n  "schema_version": 1,')
    assert json.loads(piped) == json.loads(shown) == json.loads(json.dumps(document))
    assert "ünïcode ✓" in piped  # as written, not \u-escaped
