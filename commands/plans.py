"""One lifecycle for every approvable operation: request a plan, decide, apply or close it.

Restore and restart plans derive from ``Plan`` (an id, a host, the hash an approval binds
to, JSON to keep it); a rolling restart's plan over many hosts is a ``Decidable`` too (one
approval, no single host). ``request_plan`` takes the host's lock, records the request, makes
the plan on the host and stores it awaiting a decision; ``lock_for_apply`` checks that the
decision is for this very plan before anything runs; ``withdraw`` ends a plan its own
requester declined. A stored plan is rebuilt against today's inventory and is void
(``PlanVoid``, nothing done) when what it was built on changed (README "Restore", "Restart").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from commands.errors import Locked, PlanVoid, Refused
from commands.inventory import Host, Inventory
from commands.operation import Origin, new_operation_id
from commands.store import approvals, locks
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore
from commands.store.kinds import Finished, Refusal
from commands.store.log import Within, audit_log
from commands.vocabulary import PlanState, Verdict

if TYPE_CHECKING:
    import sqlite_utils


class Decidable(ABC):
    """Anything that waits for one approval: one host's plan (``Plan``) or a plan over many hosts."""

    operation: ClassVar[str]
    operation_id: str

    @property
    @abstractmethod
    def plan_hash(self) -> str:
        """sha-256 of everything the approval binds to."""

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

    @classmethod
    @abstractmethod
    def load(cls, inventory: Inventory, pending: PendingPlan) -> Self:
        """The plan a decision was made on, from its row (read once by the caller)."""


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
    def load(cls, inventory: Inventory, pending: PendingPlan) -> Self:
        """The plan a decision was made on, from its row (read once by the caller)."""
        if pending.operation != cls.operation:
            raise PlanVoid(f"plan {pending.id} is a {pending.operation} plan, not a {cls.operation} plan")
        plan = cls.from_json(pending.details, inventory.host(pending.host))
        if plan.plan_hash != pending.plan_hash:
            raise PlanVoid(f"plan void: plan {pending.id} no longer matches the hash that was approved",
                           hint="request a new plan")
        return plan


P = TypeVar("P", bound=Plan)


async def request_plan(host: Host, operation: str, *, inventory: Inventory, origin: Origin, audit: AuditStore,
                       details: dict[str, Any], make_plan: Callable[[str], Awaitable[P]],
                       nothing_to_approve: Callable[[P], tuple[str, str] | None] = lambda plan: None) -> P:
    """Plan under the host's lock; a plan with something to approve keeps the lock until it is decided.

    ``nothing_to_approve`` returns (verdict, summary) when the plan ends at once (nothing
    differs, a source is unreadable): it is finished and the host released.
    """
    operation_id = new_operation_id()
    lock = await locks.acquire(audit, host.name, operation_id, operation, origin.actor, origin.channel,
                               origin.thread_ts)
    kept = False
    try:
        log = audit_log(audit, operation, operation_id, host.name, origin.actor)
        await log.requested(origin, **details)
        plan = await make_plan(operation_id)
        await log.plan_shown(plan.to_json())
        ended = nothing_to_approve(plan)
        if ended is None:
            await approvals.create(audit, plan_id=operation_id, operation=operation, host=host.name,
                                   requested_by=origin.actor, plan_hash=plan.plan_hash, details=plan.to_json(),
                                   approvals=inventory.approvals, channel=origin.channel,
                                   message_ts=origin.thread_ts)
            kept = True
        else:
            await finish(audit, plan, origin.actor, *ended)
        return plan
    except BaseException as exc:
        await log.finished(Finished(Verdict.ERROR, f"planning failed: {exc}"))
        raise
    finally:
        if not kept:
            await locks.release(audit, lock)


async def lock_for_apply(plan: Plan, decided: PendingPlan, actor: str, audit: AuditStore) -> locks.LockHolder:
    """The host's lock for an approved plan; refused unless the decision approved exactly this plan."""
    if decided.id != plan.operation_id or decided.state != "approved":
        raise Refused(f"plan {plan.operation_id} is not approved ({decided.state})", hint="nothing was done")
    if decided.plan_hash != plan.plan_hash:
        await approvals.close(audit, decided.id, "void")
        await finish(audit, plan, actor, Verdict.REFUSED, "the plan differs from the one approved")
        raise PlanVoid(f"plan void: plan {decided.id} no longer matches the hash that was approved",
                       hint="request a new plan")
    try:
        return await locks.hold_for(audit, plan.host.name, plan.operation_id, plan.operation, actor)
    except Locked:
        await approvals.close(audit, decided.id, "void")
        raise


async def finish(audit: AuditStore, plan: Plan, actor: str, verdict: Verdict | str, summary: str,
                 extra: dict[str, Any] | None = None) -> None:
    await audit_log(audit, plan.operation, plan.operation_id, plan.host.name, actor).finished(
        Finished(Verdict(verdict), summary, extra=extra or {}))


async def withdraw(audit: AuditStore, plan: Decidable, actor: str, *, refused: bool, reason: str) -> None:
    """The requester's own front-end declined before any approval (no terminal to ask on, or "no"):
    in one transaction the plan is closed, the event says why (``refused`` or ``cancelled``), the
    host is freed."""
    def close(db: sqlite_utils.Database) -> None:
        db.execute("UPDATE plans SET state = ? WHERE id = ?", [PlanState.VOID, plan.operation_id])
        log = Within(plan.operation, plan.operation_id, plan.audit_host, actor, db=db)
        if refused:
            log.refused(Refusal(reason, plan_hash=plan.plan_hash))
        else:
            log.cancelled(reason, plan.plan_hash)
        for host in plan.locked_hosts:
            locks.free(db, host, plan.operation_id)

    await audit.write(close)
