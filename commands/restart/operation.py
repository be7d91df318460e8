"""The restart operation end to end: admit the request, plan it, apply it once approved, every step audited.

``admit_restart`` judges a request once before anything is planned (a host with a service, or
a group whose hosts all have one: a rolling restart; none busy); ``request_restart`` reads the
running service under the host's lock and stores the plan awaiting a decision;
``apply_restart`` restarts an approved plan and proves it took effect
(``commands.restart.act``). The CLI, the Slack app and the demo all drive exactly these, with
the shared lifecycle of ``commands.plans`` (README "Restart").
"""

from __future__ import annotations

from commands.errors import PlanVoid, UsageError
from commands.inventory import Host, Inventory
from commands.operation import OnFinding, OperationResult, Origin
from commands.plans import PlanRequest, admit, lock_for_apply, request_plan
from commands.restart.act import POLL_INTERVAL_S, SETTLE_S, restart
from commands.restart.plan import RestartPlan, plan_restart
from commands.restart.progress import OnProgress
from commands.restart.rollout import rollout_request
from commands.store import approvals
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore
from commands.vocabulary import Operation, PlanState


def restart_request(host: Host) -> PlanRequest:
    """A restart of one host: refused when the inventory gives it no service."""
    if host.service is None:
        raise UsageError(f"{host.name} has no service in the inventory: nothing to restart",
                         hint="add hosts.<name>.service")
    return PlanRequest.for_host(Operation.RESTART, host)


async def admit_restart(inventory: Inventory, target: str, audit: AuditStore,
                        origin: Origin | None = None) -> PlanRequest:
    """TARGET judged before anything is planned: a group is a rolling restart (``Operation.ROLLOUT``), a
    host a restart; refused when a host has no service or is busy (naming who holds it)."""
    if inventory.is_group(target):
        return await admit(audit, rollout_request(inventory, target), inventory=inventory, origin=origin)
    return await admit(audit, restart_request(inventory.host(target)), inventory=inventory, origin=origin)


async def request_restart(inventory: Inventory, host: Host, *, origin: Origin, audit: AuditStore) -> RestartPlan:
    """Plan a restart under the host's lock (one SSH connection, nothing changes); it awaits approval."""
    async def make_plan(operation_id: str) -> RestartPlan:
        return await plan_restart(host, operation_id=operation_id)

    return await request_plan(restart_request(host), inventory=inventory, origin=origin, audit=audit,
                              make_plan=make_plan)


async def apply_restart(plan: RestartPlan, decided: PendingPlan, *, origin: Origin, audit: AuditStore,
                        on_progress: OnProgress | None = None, on_finding: OnFinding | None = None,
                        poll_interval_s: float = POLL_INTERVAL_S, settle_s: float = SETTLE_S) -> OperationResult:
    """Restart an approved plan and prove it; a host that changed since the plan voids it (nothing restarted)."""
    await lock_for_apply(plan, decided, origin.actor, audit)
    try:
        result = await restart(plan, origin=origin, audit=audit, on_progress=on_progress, on_finding=on_finding,
                               request_recorded=True, poll_interval_s=poll_interval_s, settle_s=settle_s)
    except PlanVoid:
        await approvals.close(audit, plan.operation_id, PlanState.VOID)
        raise
    await approvals.close(audit, plan.operation_id, PlanState.APPLIED)
    return result
