"""The audit store, on SQLite and on PostgreSQL: migrations, append-only events and the hash chain that links them."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import pytest

from commands.store import migrations
from commands.store.db import AuditStore
from commands.store.events import GENESIS_HASH, event_hash
from commands.store.migrations import MIGRATIONS
from tests.audit_events import raw_append
from tests.store_sql import raw, rows


async def test_events_chain_and_cannot_be_updated_or_deleted(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    first = await raw_append(store, "requested", operation_id="op1", operation="verify", host="ct129", actor="u",
                               details={"origin": {"via": "cli", "channel": None, "thread_ts": None}})
    second = await raw_append(store, "finished", operation_id="op1", operation="verify", host="ct129", actor="u",
                                details={"verdict": "fail"})
    store.close()
    assert first.prev_hash == GENESIS_HASH and second.prev_hash == first.hash
    assert (first.id, second.id) == (1, 2)
    assert second.hash == event_hash({"at": second.at, "operation_id": "op1", "operation": "verify",
                                      "host": "ct129", "kind": "finished", "actor": "u",
                                      "details": {"verdict": "fail"}, "prev_hash": first.hash})
    conn = raw(store_target)
    for tamper in ("UPDATE events SET actor = 'mallory'", "DELETE FROM events",
                   *(("TRUNCATE events",) if conn.postgres else ())):
        with pytest.raises(conn.error, match="append-only"):
            conn.execute(tamper)
    assert conn.all("SELECT operation_id, host, verdict FROM operations") == [("op1", "ct129", "fail")]
    conn.close()


async def test_migrations_run_once(store_target: Path | str) -> None:
    AuditStore.open(store_target).close()
    store = AuditStore.open(store_target)
    await raw_append(store, "bot-started")
    store.close()
    found = rows(store_target, "SELECT version FROM schema_migrations ORDER BY version")
    assert found == [(n,) for n in range(1, len(MIGRATIONS) + 1)]


async def test_concurrent_appends_keep_one_chain(store_target: Path | str) -> None:
    stores = [AuditStore.open(store_target) for _ in range(3)]
    await asyncio.gather(*(raw_append(store, "check", details={"n": n}) for n in range(20) for store in stores))
    for store in stores:
        store.close()
    chain = rows(store_target, "SELECT id, prev_hash, hash FROM events ORDER BY id")
    assert [row[0] for row in chain] == list(range(1, 61))
    assert all(chain[i][1] == chain[i - 1][2] for i in range(1, len(chain)))


async def test_operations_view_says_who_approved(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    await raw_append(store, "requested", operation_id="op1", operation="restore", host="ct129", actor="slack:U1",
                       details={"origin": {"via": "slack", "channel": "C1", "thread_ts": "1.2"}})
    await raw_append(store, "approved", operation_id="op1", operation="restore", host="ct129", actor="slack:U2")
    await raw_append(store, "finished", operation_id="op1", operation="restore", host="ct129", actor="slack:U2",
                       details={"verdict": "pass"})
    store.close()
    found = rows(store_target, "SELECT requested_by, decision, decided_by, verdict, thread_ts FROM operations")
    assert found == [("slack:U1", "approved", "slack:U2", "pass", "1.2")]


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
