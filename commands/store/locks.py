"""One mutating operation per host: a lock row in the audit DB that survives a crash.

A lock whose holder process is gone (same machine, PID not alive), or whose lease ended unrenewed
(any machine: commands/store/leases.py), is stale: it is released with an audit event naming the
old holder, and the new operation proceeds.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from commands.clock import utc_now
from commands.errors import CouldNotRecord, Locked
from commands.holder import pid_alive
from commands.store.db import AuditStore
from commands.store.events import first_row, from_row
from commands.store.leases import lease_expired, lease_until, process_holder
from commands.store.log import PROOFBOT, audit_log

if TYPE_CHECKING:
    from commands.store.handle import Db


@dataclass(frozen=True)
class LockHolder:
    host: str
    operation_id: str
    operation: str
    holder: str
    pid: int
    machine: str
    acquired_at: str
    channel: str | None = None
    thread_ts: str | None = None
    lease_holder: str | None = None
    lease_expires: float | None = None

    def is_stale(self) -> bool:
        """True only when we can tell for sure: its lease ended unrenewed, or same machine and the PID is gone."""
        return lease_expired(self.lease_expires) or (self.machine == socket.gethostname() and not pid_alive(self.pid))

    def why_stale(self) -> str:
        if lease_expired(self.lease_expires):
            return f"the lease of {self.lease_holder} ended unrenewed (its process is gone)"
        return f"holder process {self.pid} on {self.machine} is gone"


async def acquire(store: AuditStore, host: str, operation_id: str, operation: str, holder: str,
                  channel: str | None = None, thread_ts: str | None = None) -> LockHolder:
    """Take the host's lock or raise Locked naming who holds it."""
    mine = LockHolder(host, operation_id, operation, holder, os.getpid(), socket.gethostname(), utc_now(),
                      channel, thread_ts, process_holder(), lease_until())
    store.keep_leases()

    def take(db: Db) -> LockHolder | None:
        current = holder_in(db, host)
        if current is not None:
            if not current.is_stale():
                return current
            db.table("locks").delete(host)
            stale.append(current)
        db.table("locks").insert(asdict(mine))
        return None

    stale: list[LockHolder] = []
    current = await store.write(take)
    for old in stale:
        await audit_log(store, old.operation, old.operation_id, host, PROOFBOT).lock_released_stale(
            old.why_stale(), asdict(old), released_for=operation_id)
    if current is not None:
        raise Locked(
            f"{host} is busy: {current.operation} {current.operation_id} by {current.holder} "
            f"since {current.acquired_at}",
            hint="wait for it to finish; one mutating operation per host at a time",
            holder=asdict(current),
        )
    return mine


async def release(store: AuditStore, lock: LockHolder) -> None:
    try:
        await store.write(lambda db: free(db, lock.host, lock.operation_id))
    except CouldNotRecord:  # freed once the database is back (commands/store/recovery.py settle_unrecorded)
        store.unrecorded.setdefault(lock.operation_id, (lock.operation, lock.host))
        raise


def free(db: Db, host: str, operation_id: str) -> None:
    """Free the host if this operation holds it; another operation's lock is left alone."""
    db.execute("DELETE FROM locks WHERE host = ? AND operation_id = ?", [host, operation_id])


async def holder_of(store: AuditStore, host: str) -> LockHolder | None:
    return await store.snapshot(lambda db: holder_in(db, host))


def holder_in(db: Db, host: str) -> LockHolder | None:
    row = first_row(db, "SELECT * FROM locks WHERE host = ?", host)
    return from_row(LockHolder, row) if row else None


async def adopt(store: AuditStore, host: str, operation_id: str) -> None:
    """A restarted bot takes over the lock of a plan still awaiting approval."""
    store.keep_leases()
    await store.write(lambda db: db.execute(
        "UPDATE locks SET pid = ?, machine = ?, lease_holder = ?, lease_expires = ? WHERE host = ? "
        "AND operation_id = ?", [os.getpid(), socket.gethostname(), process_holder(), lease_until(), host,
                                  operation_id]))


async def hold_for(store: AuditStore, host: str, operation_id: str, operation: str, holder: str,
                   channel: str | None = None, thread_ts: str | None = None) -> LockHolder:
    """The host's lock for this operation: reused when it already holds it (taken when its plan was
    shown, or adopted after a bot restart or from the replica that showed the plan), else acquired."""
    current = await holder_of(store, host)
    if current is not None and current.operation_id == operation_id:
        if current.lease_holder not in (None, process_holder()):
            # Approved through another replica than the one that showed the plan: this process runs it now, so
            # its lease (not the other's) keeps the host, and a dead holder is told by the lease that ends.
            await adopt(store, host, operation_id)
            return replace(current, pid=os.getpid(), machine=socket.gethostname(), lease_holder=process_holder(),
                           lease_expires=lease_until())
        return current
    return await acquire(store, host, operation_id, operation, holder, channel, thread_ts)


async def refuse_if_busy(store: AuditStore, host: str) -> None:
    """Fail fast, before anything is planned, when another operation holds the host."""
    current = await holder_of(store, host)
    if current is not None and not current.is_stale():
        raise Locked(f"{host} is busy: {current.operation} {current.operation_id} by {current.holder} "
                     f"since {current.acquired_at}", hint="one mutating operation per host at a time",
                     holder=asdict(current))


async def acquire_all(store: AuditStore, hosts: list[str], operation_id: str, operation: str, holder: str,
                      channel: str | None = None, thread_ts: str | None = None) -> list[LockHolder]:
    """Every host's lock for one fleet operation, or none: a busy host raises Locked naming its holder,
    and the locks taken before it are freed."""
    taken: list[LockHolder] = []
    try:
        for host in hosts:
            taken.append(await acquire(store, host, operation_id, operation, holder, channel, thread_ts))
    except BaseException:
        for lock in taken:
            await release(store, lock)
        raise
    return taken


async def hand_over(store: AuditStore, lock: LockHolder, operation_id: str, operation: str) -> LockHolder:
    """A fleet operation passes one host's lock to that host's own operation, which frees it when it ends."""
    await store.write(lambda db: db.execute(
        "UPDATE locks SET operation_id = ?, operation = ? WHERE host = ? AND operation_id = ?",
        [operation_id, operation, lock.host, lock.operation_id]))
    return replace(lock, operation_id=operation_id, operation=operation)
