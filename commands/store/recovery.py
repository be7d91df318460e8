"""After a bot restart: operations whose process died are marked interrupted, their locks released.

A fleet operation (host NULL) and each host's part of it are recovered like any read-only
operation; only the fleet's thread is told (its parts name it in ``fleet_operation_id``).

An operation is "left running" when it has a ``requested`` event and no ``finished``
one, and is not a plan still waiting for a decision (those stay valid until they expire).
It is recovered only when its process is provably gone (``commands.holder``): a CLI
restore still running while ``serve`` starts keeps its lock and finishes normally. A
request recorded before processes were recorded falls back to its lock's holder.

Each is finished with the reason that is true (``STOPPED``: this bot restarted; ``LEASE_ENDED``: another
replica stopped renewing its lease; ``UNRECORDED``: this process's own write was not taken), and its approved
plan becomes ``interrupted``.
"""

from __future__ import annotations

import functools
import json
import socket
import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from commands.holder import Holder
from commands.store import approvals, locks
from commands.store.db import AuditStore
from commands.store.deliveries import unclaim_in
from commands.store.events import first_row, sql_list
from commands.store.kinds import Finished
from commands.store.leases import adopt_orphaned_plans, process_holder
from commands.store.log import PROOFBOT, Within
from commands.vocabulary import ENDING_KINDS, EventKind, Operation, PlanState, Verdict

if TYPE_CHECKING:
    from commands.store.handle import Db

# A rollout's host as its interruption finds it: restarted and proven, restarted and not, under way when its
# process died (nothing is known since), never restarted (commands/restart/rollout.py's HostState, and unknown).
RolloutState = Literal["done", "failed", "unknown", "untouched"]
ROLLOUT_STATES: tuple[RolloutState, ...] = ("done", "failed", "unknown", "untouched")
TAKE_OVER_MAX = 50  # expired locks handled per turn; the rest at the next one
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
    hosts: tuple[tuple[str, str], ...] = ()  # a rollout's hosts in its plan's order, each with its RolloutState
    reason: str = "proofbot stopped while this ran"  # STOPPED; LEASE_ENDED or UNRECORDED say another cause
    not_sent: bool = False  # a restart whose ``restart-sent`` was never recorded: it was never sent (act.py)
    requested_by: str | None = None  # who asked (its request's origin), named wherever it is told

    @property
    def summary(self) -> str:
        """What its ``finished`` event says: who stopped, and for a restart never sent, that it was not sent (the
        UNRECORDED words "not known" would be false then: ``restart-sent`` is recorded before the command is sent)."""
        if not self.not_sent:
            return self.reason
        return (UNRECORDED_BEFORE_SEND if self.reason == UNRECORDED else self.reason) + "; " + NOT_SENT


STOPPED = Interrupted.reason  # this bot (or the CLI process that ran it) stopped: found at the next start
LEASE_ENDED = "the proofbot replica running this stopped (its lease ended)"  # another replica's, at take_over
UNRECORDED = "the audit database did not take a write: what happened after the last step recorded is not known"
UNRECORDED_BEFORE_SEND = "the audit database did not take a write before the restart was sent"
NOT_SENT = "the restart was not sent (proofbot records it before sending it): same PID expected"
RESTART_SENT = "restart-sent"  # the step a restart records just before it sends the command (commands/restart/act.py)


async def recover(store: AuditStore) -> tuple[list[Interrupted], list[approvals.PendingPlan]]:
    """Mark every operation whose process died as interrupted; return them, and the pending plans
    this process now owns (their locks adopted; plans a live process still owns are left to it)."""
    interrupted = await _interrupt_gone(store, await store.snapshot(lambda db: list(db.query(UNFINISHED))))
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


async def _interrupt_gone(store: AuditStore, rows: list[dict[str, Any]], *, gone: frozenset[str] = frozenset(),
                          reason: str = "") -> list[Interrupted]:
    """Interrupt each unfinished operation of ``rows`` whose process is provably gone (``gone``: known to be)."""
    interrupted = []
    for row in rows:
        operation_id, operation, host = row["operation_id"], row["operation"], row["host"]
        requested = json.loads(row["details"])
        origin = requested.get("origin") or {}
        fleet = requested.get("fleet") if isinstance(requested.get("fleet"), dict) else {}
        cause = reason or STOPPED
        if operation_id not in gone:
            found = await _holder_gone(store, operation_id, host, Holder.from_json(origin.get("process")))
            if found is None:
                continue
            cause = reason or found
        events = await store.events_of(operation_id)
        last = events[-1]
        # a finding's step has its ``name``; a restart's or rollout's moment its ``step`` (before, restart-sent…)
        step = (last.details.get("name") or last.details.get("step")) if isinstance(last.details, dict) else None
        summary = last.details.get("summary", "") if isinstance(last.details, dict) else ""
        record = Interrupted(operation_id, operation, host, origin.get("channel"), origin.get("thread_ts"),
                             last.kind, last.at, (f"{step}: {summary}" if summary else step) if step else last.kind,
                             fleet.get("target"), requested.get("fleet_operation_id"), reason=cause,
                             not_sent=operation == Operation.RESTART and not any(
                                 e.kind == EventKind.STEP and isinstance(e.details, dict)
                                 and e.details.get("step") == RESTART_SENT for e in events),
                             requested_by=origin.get("actor"))
        told = await store.write(functools.partial(_interrupt, record=record))
        if told is not None:
            interrupted.append(told)
    return interrupted


async def take_over(store: AuditStore, now: float | None = None) -> tuple[list[Interrupted], list[dict[str, Any]]]:
    """What a live replica does every lease renewal on a shared database: interrupt each operation whose lock's
    lease ended unrenewed (its replica died: never run again, only told), and adopt the pending plans whose
    lease ended (they stay valid). Bounded: it reads the locks (one row per busy host), never the whole log."""
    moment = time.time() if now is None else now
    settled = await settle_unrecorded(store)
    ids = await store.snapshot(lambda db: [row["operation_id"] for row in db.query(
        "SELECT operation_id FROM locks WHERE lease_expires IS NOT NULL AND lease_expires <= ? "
        "ORDER BY lease_expires LIMIT ?", [moment, TAKE_OVER_MAX])])
    rows = await store.snapshot(lambda db: _unfinished_of(db, ids))
    # A host's part of a dead replica's fleet (a rollout), running or finished (killed before it gave its host
    # back): that replica ran the fleet too.
    fleets = await store.snapshot(lambda db: _fleets_of(db, ids))
    rows += await store.snapshot(lambda db: _unfinished_of(db, [f for f in fleets if f not in ids]))
    interrupted = settled + await _interrupt_gone(store, rows, gone=frozenset(row["operation_id"] for row in rows),
                                                  reason=LEASE_ENDED)
    running = {row["operation_id"] for row in rows}
    for operation_id in dict.fromkeys(ids):
        if operation_id not in running:  # no operation left to interrupt holds it: freed all the same
            await store.write(functools.partial(_free_orphaned, operation_id=operation_id, now=moment))
    adopted = await store.write(lambda db: adopt_orphaned_plans(db, process_holder(), moment))
    for plan in adopted:
        lock = await locks.holder_of(store, plan["host"])
        if lock is not None and lock.operation_id == plan["id"]:
            await locks.adopt(store, plan["host"], plan["id"])
    return interrupted, adopted


def _fleets_of(db: Db, operation_ids: list[str]) -> list[str]:
    """The fleet operations these operations are parts of (``fleet_operation_id`` in their requests)."""
    if not operation_ids:
        return []
    marks = ", ".join("?" for _ in operation_ids)
    rows = db.query(f"SELECT details FROM events WHERE kind = '{EventKind.REQUESTED}' "
                    f"AND operation_id IN ({marks})", list(dict.fromkeys(operation_ids)))
    fleets = (json.loads(row["details"]).get("fleet_operation_id") for row in rows)
    return list(dict.fromkeys(fleet for fleet in fleets if isinstance(fleet, str)))


def _unfinished_of(db: Db, operation_ids: list[str]) -> list[dict[str, Any]]:
    if not operation_ids:
        return []
    marks = ", ".join("?" for _ in operation_ids)
    return list(db.query(UNFINISHED.replace("ORDER BY r.id", f"AND r.operation_id IN ({marks}) ORDER BY r.id"),
                         list(dict.fromkeys(operation_ids))))


async def _holder_gone(store: AuditStore, operation_id: str, host: str | None, holder: Holder | None
                       ) -> str | None:
    """Why the operation's process is gone (STOPPED, or LEASE_ENDED for another machine's replica); None while
    it may still run."""
    lock = await locks.holder_of(store, host) if host is not None else None
    if lock is not None and lock.operation_id == operation_id and lock.lease_expires is not None:
        # The lock names the process that runs it now (another replica than the one that took the request, when
        # the plan was approved through that one): gone when its lease ended, or its PID here is. Another
        # machine's is known gone by its lease alone: that replica stopped, not this bot.
        if not lock.is_stale():
            return None
        return STOPPED if lock.machine == socket.gethostname() else LEASE_ENDED
    if holder is not None:
        return STOPPED if holder.is_gone() else None
    return STOPPED if lock is None or lock.operation_id != operation_id or lock.is_stale() else None


def _interrupt(db: Db, record: Interrupted) -> Interrupted | None:
    """Finish the operation as interrupted and free its host, in one transaction; None when another replica
    finished it first (writes are one at a time, so this check and the write cannot be split)."""
    if first_row(db, f"SELECT 1 AS done FROM events WHERE operation_id = ? AND kind IN {sql_list(ENDING_KINDS)}",
                 record.operation_id):
        return None
    log = Within(record.operation, record.operation_id, record.host, PROOFBOT, db=db)
    last_event = {"kind": record.last_kind, "at": record.last_at, "step": record.last_step}
    if record.operation == Operation.ROLLOUT:  # where each host stood, for its thread and the log
        record = replace(record, hosts=tuple(rollout_states(db, record.operation_id).items()))
        by_state = {state: [host for host, s in record.hosts if s == state] for state in ROLLOUT_STATES}
        log.finished(Finished(Verdict.INTERRUPTED, record.reason, last_event=last_event,
                              counts={state: len(hosts) for state, hosts in by_state.items() if hosts},
                              extra={state: hosts for state, hosts in by_state.items()}))
    else:
        log.finished(Finished(Verdict.INTERRUPTED, record.summary, last_event=last_event,
                              extra={"restart_sent": False} if record.not_sent else {}))
    approvals.interrupt_in(db, record.operation_id)  # its approved plan, if it had one, says so too
    if record.host is None:  # a fleet's hosts not yet handed to their parts: freed with it
        db.execute("DELETE FROM locks WHERE operation_id = ?", [record.operation_id])
        return record
    holder = locks.holder_in(db, record.host)
    if holder is not None and holder.operation_id == record.operation_id:
        locks.free(db, record.host, record.operation_id)
        log.lock_released_stale("operation interrupted by a bot restart" if record.reason == STOPPED
                                else "operation interrupted: " + record.reason, asdict(holder))
    return record


def _free_orphaned(db: Db, operation_id: str, now: float) -> None:
    """Free the expired locks of an operation that is not running: one finished whose holder died before freeing
    its host, or a rollout's host part that died between taking the host's lock and its first event. A pending
    plan's lock is left to be adopted; one whose operation runs (requested, not finished) to ``_interrupt``."""
    if first_row(db, "SELECT 1 AS pending FROM plans WHERE id = ? AND state = ?", operation_id, PlanState.PENDING):
        return
    if _unfinished_of(db, [operation_id]):
        return
    for row in list(db.query("SELECT * FROM locks WHERE operation_id = ? AND lease_expires IS NOT NULL "
                             "AND lease_expires <= ?", [operation_id, now])):
        holder = locks.holder_in(db, row["host"])
        if holder is None or holder.operation_id != operation_id:
            continue
        locks.free(db, holder.host, operation_id)
        Within(holder.operation, operation_id, holder.host, PROOFBOT, db=db).lock_released_stale(
            holder.why_stale(), asdict(holder))


def rollout_states(db: Db, operation_id: str) -> dict[str, RolloutState]:
    """Each host of an interrupted rollout, in its plan's order, by what the log holds of its part (the plan
    names each part's operation id, so this reads the plan and those parts, never the whole log)."""
    plan = first_row(db, "SELECT details FROM plans WHERE id = ?", operation_id)
    parts = {str(entry.get("operation_id")): str(entry.get("host"))
             for entry in (json.loads(plan["details"]).get("hosts", []) if plan else [])}
    if not parts:
        return {}
    marks = ", ".join("?" for _ in parts)
    rows = list(db.query(f"SELECT operation_id, kind, details FROM events WHERE operation_id IN ({marks}) "
                         f"AND kind IN ('{EventKind.REQUESTED}', '{EventKind.FINISHED}')", list(parts)))
    started = {row["operation_id"] for row in rows}
    ended = {row["operation_id"]: json.loads(row["details"]).get("verdict") for row in rows
             if row["kind"] == EventKind.FINISHED}
    return {host: _part_state(operation_id in started, ended.get(operation_id))
            for operation_id, host in parts.items()}


def _part_state(started: bool, verdict: str | None) -> RolloutState:
    if not started or verdict == Verdict.REFUSED:  # never reached, or refused (changed since the plan)
        return "untouched"
    if verdict == Verdict.PASS:
        return "done"
    if verdict is None or verdict == Verdict.INTERRUPTED:  # under way when its process died
        return "unknown"
    return "failed"


async def settle_unrecorded(store: AuditStore) -> list[Interrupted]:
    """This process's operations whose write the database did not take (``store.unrecorded``), once it takes
    writes again: each unfinished one is finished interrupted and its host freed, as a dead replica's would be;
    one that did finish only frees a lock it still holds. The ones settled, to be told in their threads."""
    settled: list[Interrupted] = []
    for operation_id, (_, host) in list(store.unrecorded.items()):
        rows = await store.snapshot(functools.partial(_unfinished_of, operation_ids=[operation_id]))
        if rows:
            settled += await _interrupt_gone(store, rows, gone=frozenset([operation_id]), reason=UNRECORDED)
        elif host is not None:
            await store.write(functools.partial(locks.free, host=host, operation_id=operation_id))
        store.unrecorded.pop(operation_id, None)
    for delivery_id in list(store.unclaimed):
        await store.write(functools.partial(unclaim_in, delivery_id=delivery_id))
        store.unclaimed.discard(delivery_id)
    return settled
