"""One lifecycle for every approvable plan, over one host or many: request, decide, apply (or close).

``request_plan`` records the request, makes the plan and stores it awaiting a decision; a
plan over one host keeps that host locked while it waits, a plan over many (a rolling
restart) only refuses when one is busy, and takes the locks at apply (a pending plan must not
freeze a whole group for ``expire_after_s``). The decision is ``commands.store.approvals.decide``,
the one place that judges whether a click counts. ``begin_apply`` checks that the decision is
for this very plan (its hash), takes every host's lock (all or none) and re-reads the hosts
once (``Decidable.recheck``): a refusal there closes the plan void, logged, nothing done.
``withdraw`` ends a plan its own requester declined. A stored plan is rebuilt against today's
inventory (``Decidable.load``) and is void (``PlanVoid``) when what it was built on changed
(README "Restore", "Restart").
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from commands.errors import Locked, PlanVoid, Refused
from commands.inventory import FleetSettings, Host, Inventory
from commands.operation import Origin, new_operation_id
from commands.store import approvals, locks
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore
from commands.store.kinds import Finished, Refusal
from commands.store.log import PROOFBOT, Within, audit_log
from commands.vocabulary import PlanState, Verdict

if TYPE_CHECKING:
    from commands.store.handle import Db


def hash_of(content: dict[str, Any]) -> str:
    """sha-256 of a plan's content in canonical JSON: what an approval binds to."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class Decidable(ABC):
    """Anything that waits for a decision: one host's plan (``Plan``) or a plan over many hosts."""

    operation: ClassVar[str]
    operation_id: str

    @property
    @abstractmethod
    def plan_hash(self) -> str:
        """sha-256 of everything the approval binds to (``hash_of``)."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The plan as stored and audited; holds ``plan_hash``."""

    @property
    @abstractmethod
    def audit_host(self) -> str | None:
        """The host its events name; None for a fleet operation (its hosts' own operations name them)."""

    @property
    def locked_hosts(self) -> tuple[str, ...]:
        """The hosts whose locks this plan holds while it awaits a decision."""
        return ()

    @property
    def apply_hosts(self) -> tuple[str, ...]:
        """The hosts whose locks the apply holds (``begin_apply``)."""
        return self.locked_hosts

    async def recheck(self, fleet: FleetSettings) -> None:  # noqa: B027  (a hook: most plans need none)
        """Re-read what the plan was built on, once, before anything changes (``fleet`` bounds the reads
        of a plan over many hosts); raise ``PlanVoid`` when it changed. A one-host plan re-reads on the
        connection that then acts (restore, restart), so it does nothing here."""

    @classmethod
    @abstractmethod
    def rebuild_from(cls, inventory: Inventory, pending: PendingPlan) -> Self:
        """The plan from its stored JSON, with every target re-derived from today's inventory."""

    @classmethod
    def load(cls, inventory: Inventory, pending: PendingPlan) -> Self:
        """The plan a decision was made on, from its row (read once by the caller); void when today's
        inventory or the stored plan no longer gives the hash that was approved."""
        if pending.operation != cls.operation:
            raise PlanVoid(f"plan {pending.id} is a {pending.operation} plan, not a {cls.operation} plan")
        plan = cls.rebuild_from(inventory, pending)
        if plan.plan_hash != pending.plan_hash or plan.plan_hash != pending.details.get("plan_hash"):
            raise PlanVoid(f"plan void: plan {pending.id} no longer matches the hash that was approved",
                           hint="request a new plan")
        return plan


class Plan(Decidable):
    """A plan for one host, shown to people, stored while it awaits a decision, applied once approved."""

    host: Host

    @property
    def audit_host(self) -> str | None:
        return self.host.name

    @property
    def locked_hosts(self) -> tuple[str, ...]:
        return (self.host.name,)

    @classmethod
    @abstractmethod
    def rebuild(cls, data: dict[str, Any], host: Host) -> Self:
        """The plan from ``to_json`` output, with every target re-derived from the inventory."""

    @classmethod
    def from_json(cls, data: dict[str, Any], host: Host) -> Self:
        """Rebuild a stored plan against today's inventory; any difference voids it."""
        plan = cls.rebuild(data, host)
        if plan.plan_hash != data.get("plan_hash"):
            raise PlanVoid(f"plan void: the inventory entry of {host.name} changed since plan "
                           f"{plan.operation_id} was shown", hint="request a new plan")
        return plan

    @classmethod
    def rebuild_from(cls, inventory: Inventory, pending: PendingPlan) -> Self:
        return cls.from_json(pending.details, inventory.host(pending.host))


@dataclass(frozen=True)
class PlanRequest:
    """What is asked, judged valid once before anything is planned (``admit``): the operation, the
    hosts it would change, and whether they stay locked while the plan awaits a decision."""

    operation: str
    subject: str  # the plans row's host: the host, or the group a rolling restart covers
    hosts: tuple[str, ...]
    audit_host: str | None  # the host its events name; None for a fleet operation
    hold_while_pending: bool
    details: dict[str, Any]  # recorded with the request

    @classmethod
    def for_host(cls, operation: str, host: Host, details: dict[str, Any] | None = None) -> PlanRequest:
        return cls(operation, host.name, (host.name,), host.name, True, details or {})


async def admit(audit: AuditStore, request: PlanRequest, *, inventory: Inventory | None = None,
                origin: Origin | None = None) -> PlanRequest:
    """Refuse at once (nothing recorded) when another operation holds one of the request's hosts, or (given
    the inventory and who asks where) its policy does not take it from that channel; a front-end calls this
    before it acknowledges, so the refusal reaches the asker as the answer."""
    if inventory is not None and origin is not None:
        refuse_outside_policy(inventory, request, origin)
    for host in request.hosts:
        await locks.refuse_if_busy(audit, host)
    return request


P = TypeVar("P", bound=Decidable)


async def load_decided(plan_type: type[P], inventory: Inventory, audit: AuditStore, decided: PendingPlan) -> P:
    """The decided plan rebuilt against today's inventory (``Decidable.load``); an approved one that is void
    is ended here (closed void, finished refused, its hosts freed; a rejected one ended when it was
    decided) and ``PlanVoid`` raised."""
    try:
        return plan_type.load(inventory, decided)
    except PlanVoid as void:
        if decided.state == PlanState.APPROVED:
            await approvals.close(audit, decided.id, PlanState.VOID)
            await approvals.close_unapplied(audit, decided.id, PROOFBOT, Verdict.REFUSED, void.message)
        raise


def refuse_outside_policy(inventory: Inventory, request: PlanRequest, origin: Origin) -> None:
    """A request from a channel its policy does not name is refused, nothing recorded (docs/policies.md);
    the strictest host's policy rules a plan over many."""
    if origin.channel is not None:
        refuse_outside(inventory, request.operation, request.subject, request.hosts, origin.channel)


def refuse_outside(inventory: Inventory, operation: str, subject: str, hosts: Sequence[str], channel: str) -> None:
    """Refused when the policy of ``operation`` on ``hosts`` (the strictest of theirs) does not take it in
    ``channel``; also for a verify, which is no plan."""
    applied = inventory.policy(operation, tuple(hosts))
    channels = applied.policy.channels
    if channels is not None and channel not in channels:
        raise Refused(f"{operation} on {subject} is taken only in " + ", ".join(channels),
                      hint=f"policy {applied.index} of the inventory: {applied.policy.text()}")


async def request_plan(request: PlanRequest, *, inventory: Inventory, origin: Origin, audit: AuditStore,
                       make_plan: Callable[[str], Awaitable[P]],
                       nothing_to_approve: Callable[[P], tuple[str, str] | None] = lambda plan: None) -> P:
    """Record the request, make the plan and store it awaiting a decision.

    A request that holds its hosts while pending takes their locks first (a busy host raises
    ``Locked``, nothing recorded) and keeps them until the plan is decided; one that does not was
    judged free by ``admit`` and is not judged again here (the apply takes the locks).
    ``nothing_to_approve`` returns (verdict, summary) when the plan ends at once (nothing differs, a
    source is unreadable): it is finished and the hosts released.
    """
    refuse_outside_policy(inventory, request, origin)
    operation_id = new_operation_id()
    held = (await locks.acquire_all(audit, list(request.hosts), operation_id, request.operation, origin.actor,
                                    origin.channel, origin.thread_ts)) if request.hold_while_pending else []
    kept = False
    log = audit_log(audit, request.operation, operation_id, request.audit_host, origin.actor)
    try:
        await log.requested(origin, **request.details)
        plan = await make_plan(operation_id)
        await log.plan_shown(plan.to_json())
        ended = nothing_to_approve(plan)
        if ended is None:
            await approvals.create(audit, plan_id=operation_id, operation=request.operation, host=request.subject,
                                   requested_by=origin.actor, plan_hash=plan.plan_hash, details=plan.to_json(),
                                   approvals=inventory.approvals, channel=origin.channel,
                                   message_ts=origin.thread_ts)
            kept = True
        else:
            await finish(audit, plan, origin.actor, *ended)
        return plan
    except BaseException as exc:
        verdict = Verdict.REFUSED if isinstance(exc, Refused) else Verdict.ERROR
        await log.finished(Finished(verdict, f"planning failed: {exc}"))
        raise
    finally:
        if not kept:
            for lock in held:
                await locks.release(audit, lock)


async def begin_apply(plan: Decidable, decided: PendingPlan, actor: str, audit: AuditStore, *,
                      fleet: FleetSettings | None = None, channel: str | None = None,
                      thread_ts: str | None = None) -> list[locks.LockHolder]:
    """Every lock the apply needs, for a plan decided approved exactly as it is, its hosts re-read once.

    Raises ``Refused`` with nothing done: not approved (nothing recorded); or the plan's hash is not
    the approved one, a host is busy (``Locked``, naming the holder) or changed since the plan
    (``PlanVoid``): then the plan is closed void, the refusal and the end logged, every lock freed.
    """
    if decided.id != plan.operation_id or decided.state != PlanState.APPROVED:
        raise Refused(f"plan {plan.operation_id} is not approved ({decided.state})", hint="nothing was done")
    taken: list[locks.LockHolder] = []
    try:
        if decided.plan_hash != plan.plan_hash:
            raise PlanVoid(f"plan void: plan {decided.id} no longer matches the hash that was approved",
                           hint="request a new plan")
        for host in plan.apply_hosts:
            taken.append(await locks.hold_for(audit, host, plan.operation_id, plan.operation, actor, channel,
                                              thread_ts))
        await plan.recheck(fleet or FleetSettings())
    except Refused as exc:
        await _release(audit, taken)
        await refuse(audit, plan, actor, exc)
        raise
    except BaseException:
        await _release(audit, taken)
        raise
    return taken


async def lock_for_apply(plan: Plan, decided: PendingPlan, actor: str, audit: AuditStore) -> locks.LockHolder:
    """``begin_apply`` for a one-host plan: its host's lock (the one held since the plan was shown)."""
    return (await begin_apply(plan, decided, actor, audit))[0]


async def _release(audit: AuditStore, taken: Sequence[locks.LockHolder]) -> None:
    for lock in taken:
        await locks.release(audit, lock)


async def refuse(audit: AuditStore, plan: Decidable, actor: str, exc: Refused) -> None:
    """An approved plan that will not be applied (nothing changed): closed void, the refusal and its end
    logged (a busy host's holder named)."""
    await approvals.close(audit, plan.operation_id, PlanState.VOID)
    log = audit_log(audit, plan.operation, plan.operation_id, plan.audit_host, actor)
    await log.refused(Refusal(str(exc), plan_hash=plan.plan_hash,
                              holder=exc.holder if isinstance(exc, Locked) else None))
    await log.finished(Finished(Verdict.REFUSED, exc.message))


async def finish(audit: AuditStore, plan: Decidable, actor: str, verdict: Verdict | str, summary: str,
                 extra: dict[str, Any] | None = None) -> None:
    await audit_log(audit, plan.operation, plan.operation_id, plan.audit_host, actor).finished(
        Finished(Verdict(verdict), summary, extra=extra or {}))


async def withdraw(audit: AuditStore, plan: Decidable, actor: str, *, refused: bool, reason: str) -> None:
    """The requester's own front-end declined before any approval (no terminal to ask on, or "no"):
    in one transaction the plan is closed, the event says why (``refused`` or ``cancelled``), the
    hosts are freed."""
    def close(db: Db) -> None:
        approvals.set_state(db, plan.operation_id, PlanState.VOID)
        log = Within(plan.operation, plan.operation_id, plan.audit_host, actor, db=db)
        if refused:
            log.refused(Refusal(reason, plan_hash=plan.plan_hash))
        else:
            log.cancelled(reason, plan.plan_hash)
        for host in plan.locked_hosts:
            locks.free(db, host, plan.operation_id)

    await audit.write(close)
