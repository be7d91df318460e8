"""Plans awaiting approval, on SQLite and PostgreSQL: the first decision wins, read once and logged in the same
transaction."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from commands.errors import Refused
from commands.inventory import Approvals
from commands.store import approvals, locks
from commands.store.db import AuditStore

APPROVALS = Approvals(approvers=["U2", "U3"])


async def new_plan(store: AuditStore, plan_id: str = "op-1", approvals_: Approvals = APPROVALS) -> None:
    await approvals.create(store, plan_id=plan_id, operation="restore", host="ct129", requested_by="slack:U1",
                           plan_hash="h1", details={"files": ["a.py"]}, approvals=approvals_)


async def rows(store: AuditStore, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return await store.snapshot(lambda db: [tuple(row.values()) for row in db.query(sql, params)])


async def test_decide_reads_the_plan_once_and_returns_it_decided(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    await new_plan(store)
    traced: list[str] = []
    await store.transaction(lambda conn: conn.set_trace_callback(traced.append))
    plan = await approvals.decide(store, "op-1", "slack:U2", "approved", APPROVALS, user_id="U2")
    assert traced[0] == "COMMIT"  # of the transaction that set the tracer
    statements = traced[1:]
    await store.transaction(lambda conn: conn.set_trace_callback(None))
    assert (plan.state, plan.decided_by, plan.details) == ("approved", "slack:U2", {"files": ["a.py"]})
    assert await rows(store, "SELECT state, decided_by, decided_at FROM plans") == [
        (plan.state, plan.decided_by, plan.decided_at)]
    plan_reads = [sql for sql in statements if re.search(r"\bFROM plans\b", sql) or "RETURNING" in sql]
    assert len(plan_reads) == 2 and "RETURNING" in plan_reads[1]  # the SELECT, then the UPDATE that decides
    assert statements.count("BEGIN IMMEDIATE") == 1  # and the approved event went in the same transaction
    (details,) = await rows(store, "SELECT details FROM events WHERE kind = 'approved' AND actor = 'slack:U2'")
    assert json.loads(details[0]) == {"plan_hash": "h1", "requested_by": "slack:U1"}
    store.close()


async def test_two_approvers_at_once_one_wins(store_target: Path | str) -> None:
    stores = [AuditStore.open(store_target) for _ in range(2)]  # two connections, like two processes
    await new_plan(stores[0])
    results = await asyncio.gather(
        *(approvals.decide(store, "op-1", f"slack:{user}", "approved", APPROVALS, user_id=user)
          for store, user in zip(stores, ("U2", "U3"), strict=True)), return_exceptions=True)
    won = [r for r in results if isinstance(r, approvals.PendingPlan)]
    lost = [r for r in results if isinstance(r, Refused)]
    assert len(won) == 1 and len(lost) == 1
    assert f"already approved by {won[0].decided_by}" in lost[0].message
    assert await rows(stores[0], "SELECT actor FROM events WHERE kind = 'approved'") == [(won[0].decided_by,)]
    for store in stores:
        store.close()


async def test_refusals_leave_the_plan_pending(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    await new_plan(store)
    with pytest.raises(Refused, match="not an approver"):
        await approvals.decide(store, "op-1", "slack:U9", "approved", APPROVALS, user_id="U9")
    with pytest.raises(Refused, match="another approver must approve"):
        await approvals.decide(store, "op-1", "slack:U1", "approved", Approvals(approvers=["U1"]), user_id="U1")
    with pytest.raises(Refused, match="no such plan 'op-x'"):
        await approvals.decide(store, "op-x", "slack:U2", "approved", APPROVALS, user_id="U2")
    assert await rows(store, "SELECT state, decided_by FROM plans") == [("pending", None)]
    rejected = await approvals.decide(store, "op-1", "slack:U1", "rejected", APPROVALS, user_id="U1")
    assert (rejected.state, rejected.decided_by) == ("rejected", "slack:U1")  # the requester may withdraw
    store.close()


async def test_a_click_after_expiry_expires_the_plan(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    await new_plan(store, approvals_=Approvals(approvers=["U2"], expire_after_s=0.01))
    await asyncio.sleep(0.05)
    with pytest.raises(Refused, match="this plan expired at"):
        await approvals.decide(store, "op-1", "slack:U2", "approved", APPROVALS, user_id="U2")
    with pytest.raises(Refused, match="already expired by proofbot"):
        await approvals.decide(store, "op-1", "slack:U2", "approved", APPROVALS, user_id="U2")
    assert await rows(store, "SELECT state FROM plans") == [("expired",)]
    (details,) = await rows(store, "SELECT details FROM events WHERE kind = 'expired'")
    assert json.loads(details[0])["clicked_by"] == "slack:U2"
    assert await approvals.expire_if_due(store, "op-1") is None  # already expired: nothing more
    store.close()


async def test_expire_if_due_expires_once_and_only_when_due(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    await new_plan(store, "op-later")
    await new_plan(store, "op-soon", Approvals(expire_after_s=0.01))
    await asyncio.sleep(0.05)
    assert await approvals.expire_if_due(store, "op-later") is None
    expired = await approvals.expire_if_due(store, "op-soon")
    assert expired is not None and (expired.state, expired.decided_by) == ("expired", None)
    assert expired.decided_at is not None
    assert await approvals.expire_if_due(store, "op-soon") is None
    assert await rows(store, "SELECT id, state FROM plans ORDER BY id") == [("op-later", "pending"),
                                                                           ("op-soon", "expired")]
    assert await rows(store, "SELECT operation_id FROM events WHERE kind = 'expired'") == [("op-soon",)]
    store.close()


async def test_close_unapplied_finishes_and_frees_only_its_own_lock(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    await new_plan(store, "op-1")
    await new_plan(store, "op-2")
    await locks.acquire(store, "ct129", "op-1", "restore", "slack:U1")
    await approvals.close_unapplied(store, "op-2", "slack:U1", "rejected", "rejected in Slack")
    assert (await locks.holder_of(store, "ct129")) is not None  # op-1's lock stays
    await approvals.close_unapplied(store, "op-1", "slack:U1", "rejected", "rejected in Slack")
    assert await locks.holder_of(store, "ct129") is None
    finished = await rows(store, "SELECT operation_id, json_extract(details, '$.verdict') FROM events "
                                 "WHERE kind = 'finished' ORDER BY id")
    assert finished == [("op-2", "rejected"), ("op-1", "rejected")]
    with pytest.raises(Refused, match="no such plan"):
        await approvals.close_unapplied(store, "op-x", "slack:U1", "rejected", "gone")
    store.close()


def test_set_message_is_gone() -> None:
    assert not hasattr(approvals, "set_message")
    assert sqlite3.sqlite_version_info >= (3, 35)  # UPDATE ... RETURNING, which decides and reads in one


async def test_a_rejection_or_an_expiry_ends_the_plan_with_its_decision_and_frees_its_host(
        store_target: Path | str) -> None:
    """The decision that ends a plan ends it in its own transaction: finished, the host freed; no front-end
    has to close it (nor can a late click leave the host locked)."""
    store = AuditStore.open(store_target)
    await new_plan(store, "op-1")
    await locks.acquire(store, "ct129", "op-1", "restore", "slack:U1")
    await approvals.decide(store, "op-1", "slack:U2", "rejected", APPROVALS, user_id="U2", reason="not now")
    assert await locks.holder_of(store, "ct129") is None
    await new_plan(store, "op-2", Approvals(approvers=["U2"], expire_after_s=0.01))
    await locks.acquire(store, "ct129", "op-2", "restore", "slack:U1")
    await asyncio.sleep(0.05)
    with pytest.raises(Refused, match="this plan expired at"):
        await approvals.decide(store, "op-2", "slack:U2", "approved", APPROVALS, user_id="U2")
    assert await locks.holder_of(store, "ct129") is None
    finished = await rows(store, "SELECT operation_id, actor, json_extract(details, '$.verdict') AS verdict, "
                                 "json_extract(details, '$.summary') AS summary FROM events WHERE kind = 'finished' "
                                 "ORDER BY id")
    assert finished == [("op-1", "slack:U2", "rejected", "rejected: not now"),
                        ("op-2", "proofbot", "expired", "no decision before the plan expired")]
    store.close()
