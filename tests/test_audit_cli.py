"""``proofbot audit`` and ``proofbot audit verify`` as a user runs them: output, JSON and exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from commands.store.db import AuditStore
from tests.audit_events import cli_origin, record_operation, slack_origin
from tests.conftest import run_cli, write_inventory
from tests.store_sql import rows


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    return write_inventory(tmp_path / "inventory.yml",
                           {"hosts": {"ct129": {"address": "10.0.0.1"}, "ct130": {"address": "10.0.0.2"}}})


async def make_log(db: Path | str) -> None:
    """Oldest first: a CLI verify, an approved restore, a rejected restart, a verify on ct130, a running one."""
    store = AuditStore.open(db)
    await record_operation(store, "op-1", origin=cli_origin(), verdict="fail")
    await record_operation(store, "op-2", operation="restore", origin=slack_origin("U0ALICE", "C0OPS", "200.000100"),
                           decision="approved", decided_by="slack:U0BOB")
    await record_operation(store, "op-3", operation="restart", origin=slack_origin("U0ALICE", "C0OPS", "300.000100"),
                           decision="rejected", decided_by="slack:U0BOB")
    await record_operation(store, "op-4", host="ct130", origin=cli_origin("carol@laptop"))
    await record_operation(store, "op-5", origin=slack_origin("U0DAVE", "C0OPS", "500.000100"), verdict=None)
    store.close()


async def test_audit_lists_operations_newest_first_with_approver(tmp_path: Path, store_target: Path | str) -> None:
    db = store_target  # a SQLite file, then a PostgreSQL URL
    await make_log(db)
    run = await run_cli("audit", "--db", str(db), "--json", env={"PROOFBOT_INVENTORY": str(tmp_path / "none.yml")})
    assert run.code == 0, run.stderr
    operations = json.loads(run.stdout)["operations"]
    assert [op["operation_id"] for op in operations] == ["op-5", "op-4", "op-3", "op-2", "op-1"]
    assert set(operations[0]) == {"operation_id", "operation", "host", "requested_at", "requested_by", "approved_by",
                                  "verdict", "channel", "thread_ts", "finished_at", "fleet", "part_of", "note"}
    restore = operations[3]
    assert restore | {"requested_at": None, "finished_at": None} == {
        "operation_id": "op-2", "operation": "restore", "host": "ct129", "requested_at": None,
        "requested_by": "slack:U0ALICE", "approved_by": "slack:U0BOB", "verdict": "pass",
        "channel": "C0OPS", "thread_ts": "200.000100", "finished_at": None, "fleet": None, "part_of": None,
        "note": None}
    assert restore["finished_at"] >= restore["requested_at"]
    assert (operations[2]["verdict"], operations[2]["approved_by"]) == ("rejected", None)
    assert (operations[0]["verdict"], operations[0]["finished_at"]) == ("in progress", None)
    assert (operations[4]["verdict"], operations[4]["channel"], operations[4]["thread_ts"]) == ("fail", None, None)


async def test_audit_host_and_limit_and_the_view_is_recorded(inventory: Path, store_target: Path | str) -> None:
    db = store_target
    await make_log(db)
    run = await run_cli("audit", "ct129", "--limit", "2", "--db", str(db), "--inventory", str(inventory))
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("Audit trail for ct129: last 2 operations, newest first")
    assert "op-5" in run.stdout and "op-3" in run.stdout and "op-4" not in run.stdout
    assert "rejected by slack:U0BOB" in run.stdout
    assert "thread: Slack channel C0OPS, thread_ts 500.000100" in run.stdout
    full = await run_cli("audit", "ct129", "--db", str(db), "--inventory", str(inventory))
    assert "approved by slack:U0BOB" in full.stdout and "(from the CLI, no thread)" in full.stdout
    [(kind, host, details)] = rows(db, "SELECT kind, host, details FROM events ORDER BY id DESC LIMIT 1")
    assert (kind, host) == ("viewed", "ct129")
    assert json.loads(details)["listed"] == ["op-5", "op-3", "op-2", "op-1"]


async def test_unknown_host_exits_2_with_the_known_ones(tmp_path: Path, inventory: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    run = await run_cli("audit", "ct999", "--db", str(db), "--inventory", str(inventory))
    assert run.code == 2
    assert "unknown host 'ct999'" in run.stderr and "known hosts: ct129, ct130" in run.stderr


@pytest.mark.parametrize("limit", ["0", "-3", "ten", "1001"])
async def test_bad_limit_exits_2(tmp_path: Path, limit: str) -> None:
    run = await run_cli("audit", "--limit", limit, "--db", str(tmp_path / "audit.db"))
    assert run.code == 2 and "N must be a whole number" in run.stderr


async def test_missing_database_exits_2_and_is_not_created(tmp_path: Path) -> None:
    for args in (("audit",), ("audit", "verify")):
        run = await run_cli(*args, "--db", str(tmp_path / "nope.db"))
        assert run.code == 2 and "no audit database" in run.stderr
    assert not (tmp_path / "nope.db").exists()


async def test_verify_intact_then_broken_without_any_inventory(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    env = {"PROOFBOT_INVENTORY": str(tmp_path / "no-such-inventory.yml")}
    run = await run_cli("audit", "verify", "--db", str(db), env=env)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith("34 events, chain intact")
    head = run.stdout.split("--anchor ")[1].split("`")[0]
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_are_append_only_update")
    conn.execute("UPDATE events SET actor = 'slack:U0MALLORY' WHERE id = 10")
    conn.commit()
    broken = await run_cli("audit", "verify", "--db", str(db), "--anchor", head, env=env)
    assert broken.code == 1
    assert broken.stdout.startswith("chain BROKEN at event #10: content edited")
    assert "append-only triggers missing" in broken.stdout and "events_are_append_only_update" in broken.stdout
    as_json = json.loads((await run_cli("audit", "verify", "--db", str(db), "--json", env=env)).stdout)
    assert as_json["intact"] is False
    assert as_json["broken"] | {"detail": ""} == {"event_id": 10, "problem": "edited", "detail": ""}


async def test_verify_truncated_tail_exits_1(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_are_append_only_delete")
    conn.execute("DELETE FROM events WHERE id > 30")
    conn.commit()
    run = await run_cli("audit", "verify", "--db", str(db))
    assert run.code == 1
    assert "chain BROKEN at event #31: tail truncated" in run.stdout


async def test_bad_anchor_is_usage(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    run = await run_cli("audit", "verify", "--db", str(db), "--anchor", "12")
    assert run.code == 2 and "bad anchor" in run.stderr
