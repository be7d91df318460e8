"""Plans awaiting approval, and the rules for deciding them.

The first decision wins atomically (one UPDATE … WHERE state = 'pending'), so two
approvers clicking at once yield exactly one apply. A plan binds its approval to the
plan hash that was shown; expiry, self-approval and the approver list come from the
inventory's ``approvals``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from commands.errors import Refused
from commands.inventory import Approvals
from commands.operation import utc_now
from commands.store import locks
from commands.store.events import AuditStore

Decision = Literal["approved", "rejected"]


@dataclass(frozen=True)
class PendingPlan:
    id: str
    operation: str
    host: str
    requested_by: str
    created_at: str
    expires_at: float
    plan_hash: str
    details: dict[str, Any]
    state: str
    decided_by: str | None
    decided_at: str | None
    channel: str | None
    message_ts: str | None

    def expires_at_utc(self) -> str:
        return datetime.fromtimestamp(self.expires_at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _row(row: tuple[Any, ...]) -> PendingPlan:
    values = list(row)
    values[7] = json.loads(values[7])
    return PendingPlan(*values)


async def create(store: AuditStore, *, plan_id: str, operation: str, host: str, requested_by: str,
                 plan_hash: str, details: dict[str, Any], approvals: Approvals,
                 channel: str | None = None, message_ts: str | None = None) -> PendingPlan:
    expires_at = time.time() + approvals.expire_after_s
    payload = json.dumps(details, sort_keys=True, default=str)
    await store.transaction(lambda conn: conn.execute(
        "INSERT INTO plans (id, operation, host, requested_by, created_at, expires_at, plan_hash, details, "
        "channel, message_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (plan_id, operation, host, requested_by, utc_now(), expires_at, plan_hash, payload, channel, message_ts)))
    return await get(store, plan_id)


async def get(store: AuditStore, plan_id: str) -> PendingPlan:
    row = await store.transaction(lambda conn: conn.execute("SELECT * FROM plans WHERE id = ?", (plan_id,)).fetchone())
    if row is None:
        raise Refused(f"no such plan {plan_id!r}", hint="it may have been made by another proofbot database")
    return _row(row)


async def set_message(store: AuditStore, plan_id: str, channel: str, message_ts: str) -> None:
    await store.transaction(lambda conn: conn.execute(
        "UPDATE plans SET channel = ?, message_ts = ? WHERE id = ?", (channel, message_ts, plan_id)))


async def decide(store: AuditStore, plan_id: str, actor: str, decision: Decision, approvals: Approvals,
                 *, user_id: str | None = None) -> PendingPlan:
    """Record the first valid decision on a plan, or raise Refused saying exactly why not.

    ``actor`` is what the audit log records; ``user_id`` is the Slack id checked against the
    approver list (None: a local CLI user, who already has the host's keys).
    """
    now = time.time()
    outcome: list[str] = []

    def attempt(conn: sqlite3.Connection) -> None:
        plan = _row(conn.execute("SELECT * FROM plans WHERE id = ?", (plan_id,)).fetchone())
        if plan.state != "pending":
            outcome.append("decided")
            return
        if plan.expires_at <= now:
            conn.execute("UPDATE plans SET state = 'expired', decided_at = ? WHERE id = ? AND state = 'pending'",
                         (utc_now(), plan_id))
            outcome.append("expired")
            return
        is_requester = actor == plan.requested_by
        if user_id is not None and decision == "approved":
            if user_id not in approvals.approvers:
                outcome.append("not-approver")
                return
            if is_requester and not approvals.allow_self_approval:
                outcome.append("self")
                return
        if user_id is not None and decision == "rejected" and not is_requester and user_id not in approvals.approvers:
            outcome.append("not-approver")
            return
        cursor = conn.execute(
            "UPDATE plans SET state = ?, decided_by = ?, decided_at = ? WHERE id = ? AND state = 'pending'",
            (decision, actor, utc_now(), plan_id))
        outcome.append("ok" if cursor.rowcount == 1 else "decided")

    exists = await store.transaction(lambda conn: conn.execute("SELECT 1 FROM plans WHERE id = ?",
                                                                (plan_id,)).fetchone())
    if exists is None:
        raise Refused(f"no such plan {plan_id!r}")
    await store.transaction(attempt)
    plan = await get(store, plan_id)
    match outcome[0]:
        case "ok":
            await store.append(decision, operation_id=plan.id, operation=plan.operation, host=plan.host,
                               actor=actor, details={"plan_hash": plan.plan_hash, "requested_by": plan.requested_by})
            return plan
        case "decided":
            raise Refused(f"this plan was already {plan.state} by {plan.decided_by or 'proofbot'} "
                          f"at {plan.decided_at}", hint="nothing more was done")
        case "expired":
            await store.append("expired", operation_id=plan.id, operation=plan.operation, host=plan.host,
                               actor="proofbot", details={"expired_at": plan.expires_at_utc(), "clicked_by": actor})
            raise Refused(f"this plan expired at {plan.expires_at_utc()}", hint=f"run /{plan.operation} again")
        case "self":
            raise Refused("you requested this plan; another approver must approve it",
                          hint="allow_self_approval is false in the inventory")
        case _:
            raise Refused("you are not an approver for this plan",
                          hint="ask one of the approvers listed in the inventory")


async def expire_if_due(store: AuditStore, plan_id: str) -> PendingPlan | None:
    """Mark a pending plan expired once its time has passed; returns it when this call expired it."""
    def attempt(conn: sqlite3.Connection) -> int:
        return conn.execute("UPDATE plans SET state = 'expired', decided_at = ? "
                            "WHERE id = ? AND state = 'pending' AND expires_at <= ?",
                            (utc_now(), plan_id, time.time())).rowcount
    if await store.transaction(attempt) != 1:
        return None
    plan = await get(store, plan_id)
    await store.append("expired", operation_id=plan.id, operation=plan.operation, host=plan.host, actor="proofbot",
                       details={"expired_at": plan.expires_at_utc()})
    return plan


async def close(store: AuditStore, plan_id: str, state: str) -> None:
    """Mark a plan void or applied (states that follow approval)."""
    await store.transaction(lambda conn: conn.execute("UPDATE plans SET state = ? WHERE id = ?", (state, plan_id)))


async def close_unapplied(store: AuditStore, plan_id: str, actor: str, verdict: str, reason: str) -> None:
    """End a plan that will not be applied (rejected, expired, declined): finish it, free the host."""
    plan = await get(store, plan_id)
    holder = await locks.holder_of(store, plan.host)
    await store.append("finished", operation_id=plan_id, operation=plan.operation, host=plan.host, actor=actor,
                       details={"verdict": verdict, "summary": reason})
    if holder is not None and holder.operation_id == plan_id:
        await locks.release(store, holder)
