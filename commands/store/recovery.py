"""After a bot restart: operations whose process died are marked interrupted, their locks released.

A fleet operation (host NULL) and each host's part of it are recovered like any read-only
operation; only the fleet's thread is told (its parts name it in ``fleet_operation_id``).

An operation is "left running" when it has a ``requested`` event and no ``finished``
one, and is not a plan still waiting for a decision (those stay valid until they expire).
It is recovered only when its process is provably gone (``commands.holder``): a CLI
restore still running while ``serve`` starts keeps its lock and finishes normally. A
request recorded before processes were recorded falls back to its lock's holder.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from commands.holder import Holder
from commands.store import approvals, locks
from commands.store.db import AuditStore
from commands.store.events import sql_list
from commands.store.kinds import Finished
from commands.store.leases import lease_expired
from commands.store.log import PROOFBOT, Within
from commands.vocabulary import ENDING_KINDS, EventKind, PlanState, Verdict

if TYPE_CHECKING:
    import sqlite_utils

UNFINISHED = f"""
SELECT r.operation_id, r.operation, r.host, r.details FROM events r
WHERE r.kind = '{EventKind.REQUESTED}' AND r.operation_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM events f WHERE f.operation_id = r.operation_id
                  AND f.kind IN {sql_list(ENDING_KINDS)})
  AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.id = r.operation_id AND p.state = '{PlanState.PENDING}')
ORDER BY r.id
"""


@dataclass(frozen=True)
class Interrupted:
    operation_id: str
    operation: str
    host: str | None  # None for a fleet operation (its hosts are its parts)
    channel: str | None
    thread_ts: str | None
    last_kind: str
    last_at: str
    last_step: str
    fleet_target: str | None = None  # a fleet operation (``verify GROUP``; host None): what it was asked for
    fleet_operation_id: str | None = None  # one host's part of that fleet: the fleet tells its story


async def recover(store: AuditStore) -> tuple[list[Interrupted], list[approvals.PendingPlan]]:
    """Mark every operation whose process died as interrupted; return them, and the pending plans
    this process now owns (their locks adopted; plans a live process still owns are left to it)."""
    interrupted = []
    for row in await store.snapshot(lambda db: list(db.query(UNFINISHED))):
        operation_id, operation, host = row["operation_id"], row["operation"], row["host"]
        requested = json.loads(row["details"])
        origin = requested.get("origin") or {}
        fleet = requested.get("fleet") if isinstance(requested.get("fleet"), dict) else {}
        if not await _holder_gone(store, operation_id, host, Holder.from_json(origin.get("process"))):
            continue
        events = await store.events_of(operation_id)
        last = events[-1]
        step = last.details.get("name") if isinstance(last.details, dict) else None
        summary = last.details.get("summary", "") if isinstance(last.details, dict) else ""
        record = Interrupted(operation_id, operation, host, origin.get("channel"), origin.get("thread_ts"),
                             last.kind, last.at, f"{step}: {summary}" if step else last.kind,
                             fleet.get("target"), requested.get("fleet_operation_id"))
        await store.write(functools.partial(_interrupt, record=record))
        interrupted.append(record)
    plans = await store.snapshot(lambda db: [approvals.plan_of(row) for row in db.query(
        "SELECT * FROM plans WHERE state = ? ORDER BY created_at", [PlanState.PENDING])])
    ours = []
    for plan in plans:
        lock = await locks.holder_of(store, plan.host)
        if lock is not None and lock.operation_id == plan.id and not lock.is_stale():
            continue  # a live process (a CLI asking at its prompt) still owns this plan
        if lock is not None and lock.operation_id == plan.id:
            await locks.adopt(store, plan.host, plan.id)
        ours.append(plan)
    return interrupted, ours


async def _holder_gone(store: AuditStore, operation_id: str, host: str | None, holder: Holder | None) -> bool:
    lock = await locks.holder_of(store, host) if host is not None else None
    if lock is not None and lock.operation_id == operation_id and lease_expired(lock.lease_expires):
        return True  # its process stopped renewing the host's lease: gone, on whatever machine it ran
    if holder is not None:
        return holder.is_gone()
    return lock is None or lock.operation_id != operation_id or lock.is_stale()


def _interrupt(db: sqlite_utils.Database, record: Interrupted) -> None:
    """Finish the operation as interrupted and free its host, in one transaction."""
    log = Within(record.operation, record.operation_id, record.host, PROOFBOT, db=db)
    log.finished(Finished(Verdict.INTERRUPTED, "proofbot stopped while this ran",
                          last_event={"kind": record.last_kind, "at": record.last_at, "step": record.last_step}))
    if record.host is None:  # a fleet operation holds no host's lock; its hosts' parts are recovered each
        return
    holder = locks.holder_in(db, record.host)
    if holder is not None and holder.operation_id == record.operation_id:
        locks.free(db, record.host, record.operation_id)
        log.lock_released_stale("operation interrupted by a bot restart", asdict(holder))
