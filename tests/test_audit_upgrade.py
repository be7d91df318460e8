"""An audit DB written before the store moved to dict rows opens, upgrades and keeps its chain.

tests/recorded/audit_v4_demo.db was written by ``proofbot demo`` with the store as it was
(migrations 1-4, tuple rows); the values below were read from it with that code.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from commands.inventory import Approvals
from commands.store import approvals, locks
from commands.store.chain import verify_chain
from commands.store.db import AuditStore
from commands.store.migrations import MIGRATIONS
from commands.store.trail import recent_operations
from tests.audit_events import raw_append

FIXTURE = Path(__file__).parent / "recorded" / "audit_v4_demo.db"
HEAD_ID = 67
HEAD_HASH = "2add059819624b21e7692213f4dd30035db40e2aad910bb859151d34eb2ca564"
# (operation_id, operation, requested_by, decision, decided_by, verdict, via, requested_at, finished_at), newest first
OPERATIONS = [
    ("op-20261130T161605-96b678", "verify", "slack:UDEMO", None, None, "pass", "demo",
     "2026-11-30T16:16:05.884Z", "2026-11-30T16:16:06.210Z"),
    ("op-20261130T161600-83ec11", "restart", "slack:UDEMO", "approved", "slack:UAPPROVER", "pass", "demo",
     "2026-11-30T16:16:00.700Z", "2026-11-30T16:16:05.871Z"),
    ("op-20261130T161555-066667", "restart", "slack:UDEMO", "approved", "slack:UAPPROVER", "fail", "demo",
     "2026-11-30T16:15:55.957Z", "2026-11-30T16:15:57.757Z"),
    ("op-20261130T161555-4f2c8b", "verify", "slack:UDEMO", None, None, "fail", "demo",
     "2026-11-30T16:15:55.445Z", "2026-11-30T16:15:55.748Z"),
    ("op-20261130T161554-dd0734", "restore", "slack:UDEMO", "approved", "slack:UAPPROVER", "pass", "demo",
     "2026-11-30T16:15:54.935Z", "2026-11-30T16:15:55.443Z"),
    ("op-20261130T161554-39ee9a", "verify", "slack:UDEMO", None, None, "fail", "demo",
     "2026-11-30T16:15:54.451Z", "2026-11-30T16:15:54.928Z"),
]
RESTORE_PLAN = "op-20261130T161554-dd0734"


FIXTURE_VERSION = 4  # the schema the fixture was written with; later migrations upgrade it


def upgraded_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, copy)
    return copy


def migrations_of(path: Path) -> list[tuple[int, str, str]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT version, description, applied_at FROM schema_migrations "
                            "ORDER BY version").fetchall()


def schema_of(path: Path) -> list[tuple[str, str, str, str]]:
    """sqlite_master without root pages, whitespace in the SQL collapsed."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    return [(kind, name, table, re.sub(r"\s+", " ", sql or "").strip()) for kind, name, table, sql in rows]


async def test_db_from_the_previous_store_opens_with_its_chain_and_trail(tmp_path: Path) -> None:
    path = upgraded_copy(tmp_path)
    before = migrations_of(path)
    assert [version for version, _, _ in before] == list(range(1, FIXTURE_VERSION + 1))
    store = AuditStore.open(path)
    try:
        report = await verify_chain(store)
        assert (report.intact, report.events, report.head_id, report.head_hash) == (True, HEAD_ID, HEAD_ID, HEAD_HASH)
        trail = await recent_operations(store, "ct129", 10)
        assert [(r.operation_id, r.operation, r.requested_by, r.decision, r.decided_by, r.verdict, r.via,
                 r.requested_at, r.finished_at) for r in trail] == OPERATIONS
        plan = await approvals.get(store, RESTORE_PLAN)
        assert (plan.state, plan.decided_by, plan.decided_at) == ("applied", "slack:UAPPROVER",
                                                                 "2026-11-30T16:15:55.020Z")
        assert plan.details["plan_hash"] == plan.plan_hash
        assert [e.kind for e in await store.events_of(RESTORE_PLAN)][:3] == ["requested", "plan-shown", "approved"]

        event = await raw_append(store, "bot-started", actor="proofbot")
        assert (event.id, event.prev_hash) == (HEAD_ID + 1, HEAD_HASH)
        report = await verify_chain(store)
        assert (report.intact, report.events, report.head_id, report.head_hash) == (True, HEAD_ID + 1, event.id,
                                                                                   event.hash)
        # plans and locks written by the new code next to the old rows
        await approvals.create(store, plan_id="op-new", operation="restart", host="ct129", requested_by="slack:U1",
                               plan_hash="h", details={}, approvals=Approvals(), channel="C1", message_ts="1.2")
        decided = await approvals.decide(store, "op-new", "slack:U2", "approved", Approvals())
        assert decided.state == "approved"
        lock = await locks.acquire(store, "ct129", "op-new", "restart", "slack:U1")
        assert await locks.holder_of(store, "ct129") == lock
        await locks.release(store, lock)
    finally:
        store.close()
    after = migrations_of(path)
    assert after[:FIXTURE_VERSION] == before  # recognised as applied: none ran again
    assert [version for version, _, _ in after[FIXTURE_VERSION:]] == list(range(FIXTURE_VERSION + 1,
                                                                               len(MIGRATIONS) + 1))


async def test_fresh_db_has_the_schema_of_an_upgraded_one(tmp_path: Path) -> None:
    AuditStore.open(upgraded_copy(tmp_path)).close()
    AuditStore.open(tmp_path / "fresh.db").close()
    upgraded, fresh = schema_of(tmp_path / "old.db"), schema_of(tmp_path / "fresh.db")
    assert {name for kind, name, _, _ in fresh if kind == "table"} >= {"events", "chain_head", "locks", "plans",
                                                                       "schema_migrations"}
    assert fresh == upgraded
