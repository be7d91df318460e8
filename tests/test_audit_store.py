"""The audit store: migrations, append-only events and the hash chain that links them."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

import pytest

from commands.store import migrations
from commands.store.db import AuditStore
from commands.store.events import GENESIS_HASH, event_hash
from commands.store.migrations import MIGRATIONS
from tests.audit_events import raw_append


async def test_events_chain_and_cannot_be_updated_or_deleted(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    first = await raw_append(store, "requested", operation_id="op1", operation="verify", host="ct129", actor="u",
                               details={"origin": {"via": "cli", "channel": None, "thread_ts": None}})
    second = await raw_append(store, "finished", operation_id="op1", operation="verify", host="ct129", actor="u",
                                details={"verdict": "fail"})
    store.close()
    assert first.prev_hash == GENESIS_HASH and second.prev_hash == first.hash
    assert second.hash == event_hash({"at": second.at, "operation_id": "op1", "operation": "verify",
                                      "host": "ct129", "kind": "finished", "actor": "u",
                                      "details": {"verdict": "fail"}, "prev_hash": first.hash})
    conn = sqlite3.connect(tmp_path / "a.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE events SET actor = 'mallory'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM events")
    assert conn.execute("SELECT operation_id, host, verdict FROM operations").fetchall() == [("op1", "ct129", "fail")]


async def test_migrations_run_once(tmp_path: Path) -> None:
    AuditStore.open(tmp_path / "a.db").close()
    store = AuditStore.open(tmp_path / "a.db")
    await raw_append(store, "bot-started")
    store.close()
    rows = sqlite3.connect(tmp_path / "a.db").execute("SELECT version FROM schema_migrations").fetchall()
    assert rows == [(n,) for n in range(1, len(MIGRATIONS) + 1)]


async def test_concurrent_appends_keep_one_chain(tmp_path: Path) -> None:
    import asyncio

    stores = [AuditStore.open(tmp_path / "a.db") for _ in range(3)]
    await asyncio.gather(*(raw_append(store, "check", details={"n": n}) for n in range(20) for store in stores))
    for store in stores:
        store.close()
    rows = sqlite3.connect(tmp_path / "a.db").execute("SELECT prev_hash, hash FROM events ORDER BY id").fetchall()
    assert len(rows) == 60
    assert all(rows[i][0] == rows[i - 1][1] for i in range(1, len(rows)))


async def test_operations_view_says_who_approved(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    await raw_append(store, "requested", operation_id="op1", operation="restore", host="ct129", actor="slack:U1",
                       details={"origin": {"via": "slack", "channel": "C1", "thread_ts": "1.2"}})
    await raw_append(store, "approved", operation_id="op1", operation="restore", host="ct129", actor="slack:U2")
    await raw_append(store, "finished", operation_id="op1", operation="restore", host="ct129", actor="slack:U2",
                       details={"verdict": "pass"})
    store.close()
    row = sqlite3.connect(tmp_path / "a.db").execute(
        "SELECT requested_by, decision, decided_by, verdict, thread_ts FROM operations").fetchone()
    assert row == ("slack:U1", "approved", "slack:U2", "pass", "1.2")


async def test_a_migration_applied_meanwhile_by_another_process_is_skipped(tmp_path: Path) -> None:
    # The runner lists the applied versions before it takes the write lock; another process may
    # apply one in between, so each migration checks again under BEGIN IMMEDIATE. Here the
    # whole schema is in place when migration 1 is tried again.
    store = AuditStore.open(tmp_path / "a.db")
    before = await store.read(lambda conn: conn.execute("SELECT * FROM schema_migrations").fetchall())
    description, sql = MIGRATIONS[0]
    await store.write(functools.partial(migrations.apply_pending, version=1, description=description, sql=sql))
    assert await store.read(lambda conn: conn.execute("SELECT * FROM schema_migrations").fetchall()) == before
    store.close()
