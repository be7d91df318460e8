"""``proofbot audit verify`` holds a real DB file's whole schema against what the migrations create, and a
row holding what no append writes (a BLOB ``actor``) is named, never a traceback: each edit made with a plain
SQLite connection to the file, as someone who can write it would."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from commands.store.chain import guard_trigger_sql
from commands.store.db import AuditStore
from commands.store.schema import expected_schema
from tests.audit_events import cli_origin, raw_append, record_operation, slack_origin
from tests.conftest import CliRun, run_cli
from tests.test_audit_upgrade import upgraded_copy

MALLORY = "slack:U0MALLORY"


async def make_log(db: Path) -> None:
    store = AuditStore.open(db)
    await record_operation(store, "op-1", origin=cli_origin(), verdict="fail")
    await record_operation(store, "op-2", operation="restore", origin=slack_origin("U0ALICE", "C0OPS", "200.000100"),
                           decision="approved", decided_by="slack:U0BOB")
    store.close()


def shell(db: Path, sql: str) -> None:
    """One script written to the file."""
    with closing(sqlite3.connect(db)) as conn:
        conn.executescript(sql)


async def verify(db: Path, *flags: str) -> CliRun:
    return await run_cli("audit", "verify", "--db", str(db), *flags)


async def test_a_fresh_and_an_upgraded_db_verify_intact(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    for path in (db, upgraded_copy(tmp_path)):
        run = await verify(path, "--json")
        assert run.code == 0, run.stdout + run.stderr
        report = json.loads(run.stdout)
        assert report["intact"] is True and report["schema_differences"] == []
    assert {"events", "chain_head", "operations", "refusals", "events_are_append_only_update"} <= set(expected_schema())


async def test_a_trigger_that_drops_one_users_refusals_breaks_the_log(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    shell(db, "CREATE TRIGGER keep_quiet BEFORE INSERT ON events WHEN NEW.kind = 'refused' "
              f"AND NEW.actor = '{MALLORY}' BEGIN SELECT RAISE(IGNORE); END;")
    store = AuditStore.open(db)  # the edit works: mallory's refusals vanish, anyone else's are kept
    try:
        await raw_append(store, "refused", operation="restart", host="ct129", actor=MALLORY, details={"reason": "x"})
        await raw_append(store, "refused", operation="restart", host="ct129", actor="slack:U0ALICE", details={})
        refused = "SELECT actor FROM events WHERE kind = 'refused'"
        actors = await store.read(lambda c: [r[0] for r in c.execute(refused)])
    finally:
        store.close()
    assert actors == ["slack:U0ALICE"]
    run = await verify(db)
    assert run.code == 1, run.stdout
    assert run.stdout.startswith("BROKEN: schema differs: trigger keep_quiet added (on events)"), run.stdout
    assert "RAISE(IGNORE)" in run.stdout and "chain intact" not in run.stdout
    report = json.loads((await verify(db, "--json")).stdout)
    assert report["intact"] is False and report["broken"] is None
    assert [(d["type"], d["name"]) for d in report["schema_differences"]] == [("trigger", "keep_quiet")]


async def test_an_operations_view_that_says_pass_for_everything_breaks_the_log(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    with closing(sqlite3.connect(db)) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(operations)")]
    forged = ", ".join("'pass' AS verdict" if c == "verdict" else f"NULL AS {c}" for c in columns)
    shell(db, f"DROP VIEW operations; CREATE VIEW operations AS SELECT {forged} FROM events;")
    with closing(sqlite3.connect(db)) as conn:
        assert {row[0] for row in conn.execute("SELECT verdict FROM operations")} == {"pass"}  # what Datasette reads
    run = await verify(db)
    assert run.code == 1
    assert "BROKEN: schema differs: view operations changed" in run.stdout
    report = json.loads((await verify(db, "--json")).stdout)
    assert [(d["type"], d["name"], d["change"]) for d in report["schema_differences"]] == [
        ("view", "operations", "changed")]


@pytest.mark.parametrize(("edit", "named"), [
    ("DROP INDEX events_kind_at;", "index events_kind_at missing (on events)"),
    ("CREATE INDEX sneaky ON events(actor);", "index sneaky added (on events)"),
    ("CREATE TABLE notes (x TEXT);", "table notes added (on notes)"),
    ("DROP VIEW refusals; CREATE TABLE refusals (event_id INTEGER);", "view refusals is a table now"),
    # a guard recreated with another body: named as a changed trigger AND as a missing guard
    ("DROP TRIGGER chain_head_is_kept; CREATE TRIGGER chain_head_is_kept BEFORE DELETE ON chain_head "
     "BEGIN SELECT 1; END;", "trigger chain_head_is_kept changed"),
])
async def test_any_schema_object_added_dropped_or_changed_is_named(tmp_path: Path, edit: str, named: str) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    shell(db, edit)
    run = await verify(db)
    assert run.code == 1, run.stdout
    assert named in run.stdout.splitlines()[0], run.stdout


async def test_guards_restored_exactly_as_the_migrations_wrote_them_verify_intact(tmp_path: Path) -> None:
    """Whitespace is not a difference: a guard dropped and recreated from the migration's own text is intact."""
    db = tmp_path / "audit.db"
    await make_log(db)
    guard = guard_trigger_sql()["events_are_append_only_delete"]
    shell(db, f"DROP TRIGGER events_are_append_only_delete; {guard};")
    assert (await verify(db)).code == 0


async def test_analyze_statistics_are_not_schema(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    shell(db, "ANALYZE;")
    run = await verify(db)
    assert run.code == 0, run.stdout


def blob_actor(db: Path, kind: str) -> int:
    """Put a BLOB in one event's actor, guards dropped and restored exactly (only the row is wrong)."""
    with closing(sqlite3.connect(db)) as conn:
        event_id = int(conn.execute("SELECT min(id) FROM events WHERE kind = ?", (kind,)).fetchone()[0])
    guard = guard_trigger_sql()["events_are_append_only_update"]
    shell(db, f"DROP TRIGGER events_are_append_only_update; UPDATE events SET actor = X'736c61636b3a00ff' "
              f"WHERE id = {event_id}; {guard};")
    return event_id


async def test_a_blob_actor_is_named_by_audit_verify_not_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    event_id = blob_actor(db, "check")
    run = await verify(db)
    assert run.code == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout.startswith(f"chain BROKEN at event #{event_id}: content edited"), run.stdout
    assert "actor is a BLOB, not text" in run.stdout
    as_json = await verify(db, "--json")
    assert as_json.code == 1 and "Traceback" not in as_json.stderr, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["broken"]["event_id"] == event_id and "actor is a BLOB" in report["broken"]["detail"]


async def test_a_blob_actor_makes_the_listing_a_clean_error_naming_the_row(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    event_id = blob_actor(db, "requested")
    run = await run_cli("audit", "--db", str(db))
    assert run.code == 3 and "Traceback" not in run.stderr, run.stderr
    assert f"event #{event_id} cannot be read: actor is a BLOB, not text" in run.stderr
    as_json = await run_cli("audit", "--db", str(db), "--json")
    assert as_json.code == 3 and "Traceback" not in as_json.stderr, as_json.stderr
    error = json.loads(as_json.stdout)
    assert error["schema_version"] == 1 and error["error"]["code"] == 3
    assert f"event #{event_id}" in error["error"]["message"] and "audit verify" in error["error"]["hint"]


async def test_a_blob_decider_makes_the_listing_a_clean_error_too(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await make_log(db)
    event_id = blob_actor(db, "approved")
    run = await run_cli("audit", "--db", str(db), "--json")
    assert run.code == 3 and f"event #{event_id}" in json.loads(run.stdout)["error"]["message"], run.stderr

