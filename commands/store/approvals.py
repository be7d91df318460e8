"""Plans awaiting approval, and the rules for deciding them.

The first decision wins atomically (one UPDATE … WHERE state = 'pending'), so two
approvers clicking at once yield exactly one apply; the decision, the plan as read for it
and the event that logs it are one transaction. A plan binds its approval to the
plan hash that was shown; expiry comes from the inventory's ``approvals``, who may approve from the
``Rule`` (the policy that applies, its approvers resolved: commands/approvers.py). ``decide`` (and its
read-only twin ``may_decide``) is the one place that judges whether a click counts (``_judge``): a plan
is approved once ``required`` distinct approvers (never the requester, one person once however named)
have clicked; each click is logged as a ``vote`` (counted, or why not). A decision
that ends a plan (a rejection, an expiry) ends it in the same transaction: finished, its host
freed. The plan's state (``PlanState``) is written only here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, cast

from commands.approvers import Rule
from commands.clock import utc_now
from commands.errors import Refused
from commands.inventory import Approvals
from commands.store import locks
from commands.store.db import AuditStore
from commands.store.events import first_row, from_row
from commands.store.kinds import Finished, Vote
from commands.store.leases import lease_until, process_holder
from commands.store.log import PROOFBOT, Within
from commands.vocabulary import EventKind, PlanState, Verdict

if TYPE_CHECKING:
    from commands.store.handle import Db

Decision = Literal[PlanState.APPROVED, PlanState.REJECTED]


class Judgement(StrEnum):
    """Whether a click counts, and if not, why (``_judge``)."""

    OK = "ok"
    DECIDED = "decided"  # no longer pending
    EXPIRED = PlanState.EXPIRED
    SELF = "self"  # the requester approving their own plan
    NOT_APPROVER = "not-approver"
    TWICE = "twice"  # an approver whose approval already counts (by id or through a group)
    COUNTED = "counted"  # an approval counted, more still required
    ELSEWHERE = "elsewhere"  # a button of another plan's kind, channel or message


@dataclass(frozen=True)
class ClickedOn:
    """Where a decision was made: the button's operation family and the message it sat on.

    A click is honoured only on the message the plan was posted as, in its channel, with a
    button of the plan's own kind (a correctly signed ``restore_approve`` carrying a restart
    plan's id is refused)."""

    operation: str
    channel: str | None
    message_ts: str | None

    def mismatch(self, plan: PendingPlan) -> str:
        if self.operation != plan.operation:
            return f"a {self.operation} button cannot decide a {plan.operation} plan"
        if plan.channel and self.channel != plan.channel:
            return "this plan was posted in another channel"
        if plan.message_ts and self.message_ts != plan.message_ts:
            return "this button is not on the plan's own message"
        return ""


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
    state: PlanState
    decided_by: str | None
    decided_at: str | None
    channel: str | None
    message_ts: str | None

    def expires_at_utc(self) -> str:
        return datetime.fromtimestamp(self.expires_at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def plan_of(row: dict[str, Any]) -> PendingPlan:
    return from_row(PendingPlan, row, details=json.loads(row["details"]), state=PlanState(row["state"]))


async def create(store: AuditStore, *, plan_id: str, operation: str, host: str, requested_by: str,
                 plan_hash: str, details: dict[str, Any], approvals: Approvals,
                 channel: str | None = None, message_ts: str | None = None) -> PendingPlan:
    row = {"id": plan_id, "operation": operation, "host": host, "requested_by": requested_by,
           "created_at": utc_now(), "expires_at": time.time() + approvals.expire_after_s, "plan_hash": plan_hash,
           "details": json.dumps(details, sort_keys=True, default=str), "state": PlanState.PENDING, "decided_by": None,
           "decided_at": None, "channel": channel, "message_ts": message_ts,
           "lease_holder": process_holder(), "lease_expires": lease_until()}
    store.keep_leases()
    await store.write(lambda db: db.table("plans").insert(row))
    return plan_of(row)


async def get(store: AuditStore, plan_id: str) -> PendingPlan:
    row = await store.snapshot(lambda db: first_row(db, "SELECT * FROM plans WHERE id = ?", plan_id))
    if row is None:
        raise _no_such_plan(plan_id)
    return plan_of(row)


def _no_such_plan(plan_id: str) -> Refused:
    return Refused(f"no such plan {plan_id!r}", hint="it may have been made by another proofbot database")


def _settle(db: Db, plan_id: str, state: PlanState, decided_by: str | None,
            expired_by: float | None = None) -> PendingPlan | None:
    """The one write that decides a plan, returning the plan as it is after it (None when it was no
    longer pending, or, with ``expired_by``, not yet expired then): the first decision wins."""
    due = " AND expires_at <= ?" if expired_by is not None else ""
    rows = list(db.query(f"UPDATE plans SET state = ?, decided_by = ?, decided_at = ? "
                         f"WHERE id = ? AND state = ?{due} RETURNING *",
                         [state, decided_by, utc_now(), plan_id, PlanState.PENDING,
                          *([expired_by] if due else [])]))
    return plan_of(rows[0]) if rows else None


def _log(plan: PendingPlan, actor: str, db: Db) -> Within:
    return Within(plan.operation, plan.id, plan.host, actor, db=db)


def _expired(db: Db, plan: PendingPlan, details: dict[str, str]) -> None:
    log = _log(plan, PROOFBOT, db)
    log.expired(plan.expires_at_utc(), **details)
    _end(db, log, plan, Verdict.EXPIRED, "no decision before the plan expired")


def _end(db: Db, log: Within, plan: PendingPlan, verdict: Verdict, summary: str) -> None:
    """A plan that will not be applied, ended with its decision: finished, and its host freed if it holds it."""
    log.finished(Finished(verdict, summary))
    locks.free(db, plan.host, plan.id)


def _judge(plan: PendingPlan, actor: str, decision: Decision, rule: Rule, user_id: str | None,
           now: float, counted: tuple[str, ...] = ()) -> Judgement:
    """Does this click count? The one judgement (``counted``: the approvals already counted)."""
    if plan.state != PlanState.PENDING:
        return Judgement.DECIDED
    if plan.expires_at <= now:
        return Judgement.EXPIRED
    is_requester = actor == plan.requested_by
    if user_id is not None and decision == PlanState.APPROVED:
        if user_id not in rule.approvers:
            return Judgement.NOT_APPROVER
        if is_requester and not rule.applied.allow_self_approval:
            return Judgement.SELF
        if user_id in counted:
            return Judgement.TWICE
    if (user_id is not None and decision == PlanState.REJECTED and not is_requester
            and user_id not in rule.approvers):
        return Judgement.NOT_APPROVER
    return Judgement.OK


def _counted(db: Db, plan: PendingPlan, rule: Rule) -> tuple[str, ...]:
    """The approvals that count now: each person once, and only while the rule still names them (a member
    removed from a group, a policy changed since the click: no longer counted)."""
    users: dict[str, None] = {}
    # `counted` is read here, not compared in SQL: SQLite's json_extract gives JSON true as 1, PostgreSQL's text.
    for row in db.query(f"SELECT json_extract(details, '$.user') AS user, json_extract(details, '$.counted') "
                        f"AS counted FROM events WHERE operation_id = ? AND kind = '{EventKind.VOTE}' ORDER BY id",
                        [plan.id]):
        if row["counted"] not in (1, "true"):
            continue
        user = str(row["user"])
        if user in rule.approvers and (f"slack:{user}" != plan.requested_by or rule.applied.allow_self_approval):
            users[user] = None
    return tuple(users)


def _outside(rule: Rule, clicked_on: ClickedOn) -> str:
    """A click outside the policy's channels (a policy changed since the plan was posted) does not count."""
    channels = rule.applied.policy.channels
    if channels is None or clicked_on.channel in channels:
        return ""
    return f"policy {rule.applied.index} takes decisions on these hosts only in " + ", ".join(channels)


def _rule(approvals: Approvals | Rule) -> Rule:
    return approvals if isinstance(approvals, Rule) else Rule.of_approvals(approvals)


async def may_decide(store: AuditStore, plan_id: str, actor: str, decision: Decision,
                     approvals: Approvals | Rule, *, user_id: str | None = None,
                     clicked_on: ClickedOn | None = None) -> PendingPlan:
    """``decide``'s rules without deciding (a read, nothing written): the plan if ``actor`` may decide it
    now, else the Refused ``decide`` would raise. For asking a rejecter why before deciding; ``decide``
    judges again when the answer comes."""
    row = await store.snapshot(lambda db: first_row(db, "SELECT * FROM plans WHERE id = ?", plan_id))
    if row is None:
        raise _no_such_plan(plan_id)
    plan = plan_of(row)
    why = (clicked_on.mismatch(plan) or _outside(_rule(approvals), clicked_on)) if clicked_on is not None else ""
    outcome = Judgement.ELSEWHERE if why else _judge(plan, actor, decision, _rule(approvals), user_id, time.time())
    if outcome != Judgement.OK:
        raise _refusal(outcome, plan, why)
    return plan


async def decide(store: AuditStore, plan_id: str, actor: str, decision: Decision, approvals: Approvals | Rule,
                 *, user_id: str | None = None, clicked_on: ClickedOn | None = None,
                 reason: str = "") -> PendingPlan:
    """Record the first valid decision on a plan and return the plan as decided, or raise Refused
    saying exactly why not. An approval counted while more are required returns the plan still
    pending (its ``vote`` logged); ``approval_count`` says how many count.

    ``actor`` is what the audit log records; ``user_id`` is the Slack id checked against the
    approver list (None: a local CLI user, who already has the host's keys). ``clicked_on``: the
    button and message of a Slack click, which must be the plan's own. The plan is read once, in
    the decision's transaction, which also appends the decision's event (with ``reason``, when
    one was given: why a plan was rejected).
    """
    now = time.time()
    refusal: list[str] = []
    decision = cast(Decision, PlanState(decision))  # a test's plain "approved" is the same word

    rule = _rule(approvals)

    def attempt(db: Db) -> tuple[Judgement, PendingPlan]:
        row = first_row(db, "SELECT * FROM plans WHERE id = ?", plan_id)
        if row is None:
            raise _no_such_plan(plan_id)
        plan = plan_of(row)
        if clicked_on is not None and (why := clicked_on.mismatch(plan) or _outside(rule, clicked_on)):
            refusal.append(why)
            return Judgement.ELSEWHERE, plan
        counted = _counted(db, plan, rule)
        outcome = _judge(plan, actor, decision, rule, user_id, now, counted)
        log = _log(plan, actor, db)
        if outcome == Judgement.EXPIRED:
            plan = _settle(db, plan_id, PlanState.EXPIRED, None) or plan
            _expired(db, plan, {"clicked_by": actor})
        elif outcome in (Judgement.SELF, Judgement.NOT_APPROVER, Judgement.TWICE) and user_id is not None:
            log.vote(Vote(decision, user_id, False, list(counted), rule.required, rule.applied.to_json(),
                          why=_refusal(outcome, plan, "").message))
        elif outcome == Judgement.OK:
            approving = decision == PlanState.APPROVED and user_id is not None
            counted = (*counted, user_id) if approving and user_id is not None else counted
            if approving and user_id is not None and len(counted) < rule.required:
                # the approval that completes the count is in the decision's own event
                log.vote(Vote(decision, user_id, True, list(counted), rule.required, rule.applied.to_json(),
                              why=None))
                return Judgement.COUNTED, plan
            decided = _settle(db, plan_id, decision, actor)
            if decided is None:
                return Judgement.DECIDED, plan
            plan = decided
            log = _log(plan, actor, db)
            writer = {PlanState.APPROVED: log.approved, PlanState.REJECTED: log.rejected}[PlanState(decision)]
            # an inventory without `policies` records its decisions as it always did (the one flat rule)
            written = not rule.applied.implicit or rule.applied.index > 0
            writer(plan.plan_hash, plan.requested_by, reason or None,
                   policy=rule.applied.to_json() if written else None, approvals=list(counted) if written else None)
            if decision == PlanState.REJECTED:
                _end(db, log, plan, Verdict.REJECTED, f"rejected: {reason}" if reason else "rejected")
        return outcome, plan

    outcome, plan = await store.write(attempt)
    if outcome in (Judgement.OK, Judgement.COUNTED):
        return plan
    raise _refusal(outcome, plan, refusal[0] if refusal else "")


async def approval_count(store: AuditStore, plan_id: str, approvals: Approvals | Rule) -> tuple[str, ...]:
    """The approvals of a pending plan that count under ``approvals`` now, in the order given."""
    def read(db: Db) -> tuple[str, ...]:
        row = first_row(db, "SELECT * FROM plans WHERE id = ?", plan_id)
        if row is None:
            raise _no_such_plan(plan_id)
        return _counted(db, plan_of(row), _rule(approvals))
    return await store.snapshot(read)


def _refusal(outcome: Judgement, plan: PendingPlan, why: str) -> Refused:
    """Why a decision was not taken, in the words the decider sees."""
    match outcome:
        case Judgement.DECIDED:
            return Refused(f"this plan was already {plan.state} by {plan.decided_by or 'proofbot'} "
                           f"at {plan.decided_at}", hint="nothing more was done")
        case Judgement.EXPIRED:
            return Refused(f"this plan expired at {plan.expires_at_utc()}", hint=f"run /{plan.operation} again")
        case Judgement.ELSEWHERE:
            return Refused(f"not decided: {why} (plan {plan.id})", hint="use the buttons on the plan's message")
        case Judgement.SELF:
            return Refused("you requested this plan; another approver must approve it",
                           hint="a requester's own approval never counts (allow_self_approval is false)")
        case Judgement.TWICE:
            return Refused("your approval of this plan is already counted; another approver must approve it",
                           hint="one person counts once, by id or through a group")
        case _:
            return Refused("you are not an approver for this plan",
                           hint="ask one of the approvers listed in the inventory")


async def expire_if_due(store: AuditStore, plan_id: str) -> PendingPlan | None:
    """Mark a pending plan expired once its time has passed; returns it when this call expired it."""
    def attempt(db: Db) -> PendingPlan | None:
        plan = _settle(db, plan_id, PlanState.EXPIRED, None, expired_by=time.time())
        if plan is not None:
            _expired(db, plan, {})
        return plan
    return await store.write(attempt)


async def close(store: AuditStore, plan_id: str, state: PlanState) -> None:
    """Mark a plan void or applied (states that follow approval)."""
    await store.write(lambda db: set_state(db, plan_id, state))


def set_state(db: Db, plan_id: str, state: PlanState) -> None:
    """``close`` inside the caller's transaction (a withdrawal closes the plan with its event)."""
    if state not in (PlanState.VOID, PlanState.APPLIED):
        raise ValueError(f"a plan is closed void or applied, not {state}")
    db.execute("UPDATE plans SET state = ? WHERE id = ?", [PlanState(state), plan_id])


def interrupt_in(db: Db, plan_id: str) -> None:
    """An approved plan whose apply was interrupted (``commands/store/recovery.py``) is ``interrupted``, in the
    caller's transaction; a plan in any other state, or no plan (a verify), is left as it is."""
    db.execute("UPDATE plans SET state = ? WHERE id = ? AND state = ?",
               [PlanState.INTERRUPTED, plan_id, PlanState.APPROVED])


async def close_unapplied(store: AuditStore, plan_id: str, actor: str, verdict: Verdict | str, reason: str) -> None:
    """End a plan that will not be applied (rejected, expired, declined): finish it and free the host if
    this plan holds it, in one transaction."""
    def finish(db: Db) -> None:
        row = first_row(db, "SELECT operation, host FROM plans WHERE id = ?", plan_id)
        if row is None:
            raise _no_such_plan(plan_id)
        Within(row["operation"], plan_id, row["host"], actor, db=db).finished(Finished(Verdict(verdict), reason))
        locks.free(db, row["host"], plan_id)
    await store.write(finish)
