"""Leases on locks and plans, on SQLite and PostgreSQL: a holder's lease that ended unrenewed frees its host
(wherever the holder ran) and lets another process adopt its pending plans; a live holder's store renews
its leases by itself; a lease still running is respected."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from commands.errors import Locked
from commands.inventory import Approvals
from commands.store import approvals, leases, locks
from commands.store.db import AuditStore
from commands.store.locks import LockHolder
from commands.store.recovery import recover
from tests.audit_events import raw_append
from tests.lab.waits import until
from tests.store_sql import rows

ELSEWHERE = "replica-b"  # another machine: its PID cannot be checked from here, only its lease


def lock_of(holder: str, lease_expires: float | None) -> LockHolder:
    return LockHolder("ct129", "op-old", "restore", "slack:U9", 1, ELSEWHERE, "2026-01-01T00:00:00Z",
                      lease_holder=holder, lease_expires=lease_expires)


async def test_a_lock_whose_lease_ended_is_released_one_still_leased_is_not(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    await store.write(lambda db: db.table("locks").insert(asdict(lock_of("replica-b:1:x", time.time() + 60))))
    with pytest.raises(Locked, match="op-old"):  # a live lease on another machine: busy, never guessed stale
        await locks.acquire(store, "ct129", "op-new", "restart", "slack:U1")
    await store.write(lambda db: db.execute("UPDATE locks SET lease_expires = ?", [time.time() - 1]))
    mine = await locks.acquire(store, "ct129", "op-new", "restart", "slack:U1")
    store.close()
    assert mine.lease_holder == leases.process_holder() and mine.lease_expires is not None
    [(details,)] = rows(store_target, "SELECT details FROM events WHERE kind = 'lock-released-stale'")
    note = json.loads(details)
    assert "the lease of replica-b:1:x ended unrenewed" in note["reason"]
    assert note["holder"]["machine"] == ELSEWHERE


async def test_a_live_store_renews_its_leases_by_itself(store_target: Path | str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "RENEW_EVERY_S", 0.2)
    store = AuditStore.open(store_target)
    try:
        mine = await locks.acquire(store, "ct129", "op-1", "restart", "slack:U1")
        await store.write(lambda db: db.table("locks").insert(asdict(lock_of("replica-b:1:x", time.time() + 5)
                                                                     ) | {"host": "ct130"}))
        await store.write(lambda db: db.execute("UPDATE locks SET lease_expires = ? WHERE host = 'ct129'",
                                                [time.time() + 1]))  # as if not renewed for 29 s
        await until("the renewer thread moving ct129's lease forward",
                    lambda: _expiry(store_target, "ct129") > time.time() + leases.LEASE_S - 5, interval_s=0.2)
        assert mine.lease_holder == leases.process_holder()
        assert _expiry(store_target, "ct130") < time.time() + 6  # another holder's lease is not this one's to renew
    finally:
        store.close()


def _expiry(target: Path | str, host: str) -> float:
    [(expires,)] = rows(target, "SELECT lease_expires FROM locks WHERE host = ?", [host])
    return float(expires)


async def test_a_pending_plan_of_a_dead_holder_is_adopted_and_stays_valid(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    rules = Approvals(approvers=["U2"])
    for plan_id in ("p-live", "p-orphan", "p-decided"):
        await approvals.create(store, plan_id=plan_id, operation="restart", host="ct129", requested_by="slack:U1",
                               plan_hash="h", details={}, approvals=rules)
    past, ahead = time.time() - 1, time.time() + 60
    await store.write(lambda db: db.execute(
        "UPDATE plans SET lease_holder = 'replica-b:1:x', lease_expires = CASE id WHEN 'p-live' THEN ? ELSE ? END",
        [ahead, past]))
    await store.write(lambda db: db.execute("UPDATE plans SET state = 'approved' WHERE id = 'p-decided'"))
    adopted = await store.write(lambda db: leases.adopt_orphaned_plans(db, leases.process_holder()))
    assert [row["id"] for row in adopted] == ["p-orphan"]
    assert (await approvals.get(store, "p-orphan")).state == "pending"  # still awaiting its approval
    again = await store.write(lambda db: leases.adopt_orphaned_plans(db, "replica-c:2:y"))
    store.close()
    assert again == []  # its new holder's lease runs: nobody else takes it
    assert rows(store_target, "SELECT id, lease_holder FROM plans ORDER BY id") == [
        ("p-decided", "replica-b:1:x"), ("p-live", "replica-b:1:x"), ("p-orphan", leases.process_holder())]


def test_a_holder_id_is_per_process_and_names_the_machine() -> None:
    holder = leases.process_holder()
    assert holder == leases.process_holder() and holder.startswith(f"{socket.gethostname()}:")


async def test_recovery_interrupts_an_operation_whose_lease_ended_on_another_machine(store_target: Path | str) -> None:
    """A replica killed mid-restart on another machine: its PID cannot be checked from here, its lease tells."""
    store = AuditStore.open(store_target)
    elsewhere = {"via": "slack", "channel": "C1", "thread_ts": "1.2", "process": {"machine": ELSEWHERE, "pid": 1}}
    for operation_id, host, lease in (("op-dead", "ct129", time.time() - 1), ("op-live", "ct130", time.time() + 60)):
        await raw_append(store, "requested", operation_id=operation_id, operation="restart", host=host,
                         actor="slack:U1", details={"origin": elsewhere})
        await store.write(lambda db, o=operation_id, h=host, t=lease: db.table("locks").insert(
            asdict(lock_of("replica-b:1:x", t)) | {"host": h, "operation_id": o, "operation": "restart"}))
    interrupted, _ = await recover(store)
    assert [(op.operation_id, op.thread_ts) for op in interrupted] == [("op-dead", "1.2")]
    assert await locks.holder_of(store, "ct129") is None  # its host is free
    assert (await locks.holder_of(store, "ct130")) is not None  # a live lease: left to its replica
    assert [e.kind for e in await store.events_of("op-live")] == ["requested"]
    store.close()
