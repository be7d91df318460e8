"""The hash chain check, on SQLite and PostgreSQL: an intact log passes; hand edits, deletions, insertions and
truncation are caught.

Each tamper is done as an attacker would: with the database's own powers (the sqlite3 shell, psql as the
owner), dropping the append-only triggers first.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from commands.store import pg_migrations
from commands.store.chain import GUARD_TRIGGERS, Anchor, ChainReport, guard_trigger_sql, verify_chain
from commands.store.db import AuditStore
from commands.store.events import event_hash
from tests.audit_events import cli_origin, raw_append, record_operation, slack_origin
from tests.store_sql import Raw, raw

EVENTS = 3 * 8  # three operations: requested, 6 checks, finished


async def three_operations(path: Path | str) -> Path | str:
    store = AuditStore.open(path)
    await record_operation(store, "op-1", origin=cli_origin())
    await record_operation(store, "op-2", origin=slack_origin("U0ALICE", "C0OPS", "100.000200"), verdict="fail")
    await record_operation(store, "op-3", host="ct130", origin=cli_origin())
    store.close()
    return path


@pytest_asyncio.fixture
async def db(store_target: Path | str) -> AsyncIterator[Path | str]:
    yield await three_operations(store_target)


@pytest_asyncio.fixture
async def sqlite_db(tmp_path: Path) -> AsyncIterator[Path | str]:
    """SQLite only: for what only SQLite reads that way."""
    yield await three_operations(tmp_path / "audit.db")


def attacker(db: Path | str, *triggers: str) -> Raw:
    """A plain connection with the named triggers (default: the events guards) dropped."""
    conn = raw(db)
    for name in triggers or ("events_are_append_only_update", "events_are_append_only_delete"):
        conn.drop_trigger(name)
    return conn


def restore_guard(conn: Raw, name: str) -> None:
    """The guard put back exactly as the migrations create it."""
    conn.execute(pg_migrations.guard(name)[1] if conn.postgres else guard_trigger_sql()[name])


def rehash(conn: Raw, event_id: int) -> None:
    """Recompute one row's hash from its (edited) content, as a careful attacker would."""
    row = conn.execute("SELECT at, operation_id, operation, host, kind, actor, details, prev_hash FROM events "
                       "WHERE id = ?", (event_id,)).fetchone()
    keys = ("at", "operation_id", "operation", "host", "kind", "actor", "details", "prev_hash")
    fields = dict(zip(keys, row, strict=True))
    fields["details"] = json.loads(fields["details"])
    conn.execute("UPDATE events SET hash = ? WHERE id = ?", (event_hash(fields), event_id))


async def check(db: Path | str, anchor: Anchor | None = None) -> ChainReport:
    store = AuditStore.open(db)
    try:
        return await verify_chain(store, anchor)
    finally:
        store.close()


async def test_intact_chain(db: Path | str) -> None:
    report = await check(db)
    assert report.intact and report.broken is None
    assert report.events == EVENTS and report.head_id == EVENTS
    assert report.missing_guards == ()


async def test_edited_row_is_named(db: Path | str) -> None:
    attacker(db).execute("UPDATE events SET actor = 'mallory' WHERE id = 5")
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (5, "edited")
    assert "content does not match its hash" in report.broken.detail
    assert set(report.missing_guards) == {"events_are_append_only_update", "events_are_append_only_delete"}


async def test_edited_verdict_with_recomputed_hash_is_caught_by_the_next_link(db: Path | str) -> None:
    conn = attacker(db)
    conn.execute("""UPDATE events SET details = '{"verdict": "pass"}' WHERE id = 16""")  # op-2 said fail
    rehash(conn, 16)
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (16, "edited")
    assert "#17 was chained to a different #16" in report.broken.detail


async def test_deleted_row_is_named(db: Path | str) -> None:
    attacker(db).execute("DELETE FROM events WHERE id = 10")
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (11, "deleted")
    assert "event #10 was deleted" in report.broken.detail


async def test_deleted_first_rows_are_named(db: Path | str) -> None:
    attacker(db).execute("DELETE FROM events WHERE id <= 2")
    report = await check(db)
    assert report.broken is not None and report.broken.problem == "deleted"
    assert "#1..#2 were deleted" in report.broken.detail


async def test_inserted_row_with_a_valid_link_is_named(db: Path | str) -> None:
    """A forged 'approved' slipped in after event #8, later rows renumbered to make room."""
    conn = attacker(db, *GUARD_TRIGGERS)
    conn.execute("UPDATE events SET id = id + 1000 WHERE id > 8")
    conn.execute("UPDATE events SET id = id - 999 WHERE id > 1000")
    prev_hash = conn.execute("SELECT hash FROM events WHERE id = 8").fetchone()[0]
    fields = {"at": "2026-05-22T10:00:00.000Z", "operation_id": "op-1", "operation": "verify", "host": "ct129",
              "kind": "approved", "actor": "slack:U0MALLORY", "details": {}, "prev_hash": prev_hash}
    conn.execute("INSERT INTO events (id, at, operation_id, operation, host, kind, actor, details, prev_hash, hash) "
                 "VALUES (9, ?, 'op-1', 'verify', 'ct129', 'approved', 'slack:U0MALLORY', '{}', ?, ?)",
                 (fields["at"], prev_hash, event_hash(fields)))
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (9, "inserted")


async def test_inserted_row_with_a_made_up_hash_is_named(db: Path | str) -> None:
    conn = attacker(db, *GUARD_TRIGGERS)
    conn.execute("UPDATE events SET id = id + 1000 WHERE id > 8")
    conn.execute("UPDATE events SET id = id - 999 WHERE id > 1000")
    conn.execute("INSERT INTO events (id, at, kind, actor, details, prev_hash, hash) "
                 "VALUES (9, '2026-05-22T10:00:00.000Z', 'approved', 'x', '{}', ?, ?)", ("ab" * 32, "cd" * 32))
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (9, "inserted")


async def test_row_appended_behind_the_heads_back_is_caught(db: Path | str) -> None:
    """A well-formed event added at the end by hand: the chain links, but the head did not move."""
    conn = attacker(db, "events_move_chain_head")
    head = conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()[0]
    fields = {"at": "2026-05-22T10:00:00.000Z", "operation_id": None, "operation": None, "host": None,
              "kind": "bot-started", "actor": None, "details": {}, "prev_hash": head}
    conn.execute("INSERT INTO events (id, at, kind, details, prev_hash, hash) "
                 "VALUES (?, ?, 'bot-started', '{}', ?, ?)", (EVENTS + 1, fields["at"], head, event_hash(fields)))
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (EVENTS + 1, "inserted")


async def test_truncated_tail_is_caught(db: Path | str) -> None:
    attacker(db).execute("DELETE FROM events WHERE id > 20")
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (21, "truncated")
    assert f"#21..#{EVENTS} was deleted" in report.broken.detail


async def test_truncation_followed_by_new_appends_is_caught(db: Path | str) -> None:
    """The bot keeps appending after the tail was cut: the chain links again, the count does not."""
    attacker(db).execute("DELETE FROM events WHERE id > 20")
    store = AuditStore.open(db)
    await raw_append(store, "bot-started")
    store.close()
    report = await check(db)
    assert report.broken is not None and report.broken.problem == "deleted"
    assert f"21 events but {EVENTS + 1} were appended" in report.broken.detail


async def test_genesis_must_start_the_chain(db: Path | str) -> None:
    conn = attacker(db)
    conn.execute("UPDATE events SET prev_hash = ? WHERE id = 1", ("1" * 64,))
    rehash(conn, 1)
    report = await check(db)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (1, "genesis")


async def test_dropped_guards_alone_fail_the_check(db: Path | str) -> None:
    attacker(db, "events_are_append_only_delete")
    report = await check(db)
    assert report.broken is None and not report.intact
    assert report.missing_guards == ("events_are_append_only_delete",)


async def test_consistent_rewrite_of_chain_and_head_needs_an_anchor(db: Path | str) -> None:
    """The limit of an unkeyed chain: cut the tail AND fix the head (triggers dropped), and only a
    head noted elsewhere earlier tells. Guards restored, so nothing else shows."""
    before = await check(db)
    assert before.head_id is not None and before.head_hash is not None
    anchor = Anchor(before.head_id, before.head_hash[:16])
    conn = attacker(db, "events_are_append_only_delete", "chain_head_follows_appends")
    conn.execute("DELETE FROM events WHERE id > 20")
    conn.execute("UPDATE chain_head SET event_id = 20, events = 20, "
                 "hash = (SELECT hash FROM events WHERE id = 20)")
    # a careful attacker restores the guards exactly as they were
    restore_guard(conn, "events_are_append_only_delete")
    restore_guard(conn, "chain_head_follows_appends")
    assert (await check(db)).intact
    report = await check(db, anchor)
    assert report.broken is not None
    assert (report.broken.event_id, report.broken.problem) == (EVENTS, "anchor")


async def test_chain_head_only_follows_real_appends(db: Path | str) -> None:
    conn = raw(db)
    with pytest.raises(conn.error, match="only follows appended events"):
        conn.execute("UPDATE chain_head SET event_id = 3")
    with pytest.raises(conn.error, match="part of the audit log"):
        conn.execute("DELETE FROM chain_head")
    if conn.postgres:
        with pytest.raises(conn.error, match="part of the audit log"):
            conn.execute("TRUNCATE chain_head")
    assert conn.execute("SELECT event_id, events FROM chain_head").fetchone() == (EVENTS, EVENTS)


async def test_a_duplicate_key_that_sqlite_reads_differently_is_an_edit(sqlite_db: Path | str) -> None:
    """Text whose parse hashes like the original while SQLite's json_extract reads another verdict (PostgreSQL's
    jsonb keeps the last key, as Python does)."""
    db = sqlite_db
    conn = attacker(db)
    event_id, details = conn.execute("SELECT id, details FROM events WHERE kind = 'finished' AND "
                                     "operation_id = 'op-2'").fetchone()
    assert json.loads(details)["verdict"] == "fail"
    forged = '{"verdict": "pass", ' + details[1:]  # the last "verdict" (fail) still wins in Python
    conn.execute("UPDATE events SET details = ? WHERE id = ?", (forged, event_id))
    assert conn.execute("SELECT verdict FROM operations WHERE operation_id = 'op-2'").fetchone()[0] == "pass"
    conn.execute("CREATE TRIGGER events_are_append_only_update BEFORE UPDATE ON events "
                 "BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END")
    conn.execute("CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events\n"
                 "            BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;")
    report = await check(db)
    assert report.broken is not None and report.broken.event_id == event_id
    assert report.broken.problem == "edited"


async def test_a_guard_recreated_to_do_nothing_counts_as_missing(db: Path | str) -> None:
    conn = attacker(db, "events_are_append_only_delete")
    conn.execute("CREATE OR REPLACE FUNCTION events_are_append_only_delete() RETURNS trigger LANGUAGE plpgsql "
                 "AS $$ BEGIN RETURN NULL; END $$" if conn.postgres else
                 "CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events BEGIN SELECT 1; END")
    if conn.postgres:
        restore_guard(conn, "events_are_append_only_delete")  # the trigger as made, calling the emptied function
    report = await check(db)
    assert report.missing_guards == ("events_are_append_only_delete",) and not report.intact
