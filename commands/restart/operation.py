"""The restart operation end to end: request a plan, apply it once approved, with every step audited.

``request_restart`` reads the running service under the host's lock and stores the plan
awaiting a decision; ``apply_restart`` restarts an approved plan and proves it took effect
(``commands.restart.act``). The CLI, the Slack app and the demo all drive exactly these two,
with the shared lifecycle of ``commands.plans`` (README "Restart").
"""

from __future__ import annotations

from commands.errors import PlanVoid, UsageError
from commands.inventory import Host, Inventory
from commands.operation import OnFinding, OperationResult, Origin
from commands.plans import lock_for_apply, request_plan
from commands.restart.act import POLL_INTERVAL_S, SETTLE_S, restart
from commands.restart.plan import RestartPlan, plan_restart
from commands.restart.progress import OnProgress
from commands.store import approvals
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore


async def request_restart(inventory: Inventory, host: Host, *, origin: Origin, audit: AuditStore) -> RestartPlan:
    """Plan a restart under the host's lock (one SSH connection, nothing changes); it awaits approval."""
    if host.service is None:
        raise UsageError(f"{host.name} has no service in the inventory: nothing to restart",
                         hint="add hosts.<name>.service")

    async def make_plan(operation_id: str) -> RestartPlan:
        return await plan_restart(host, operation_id=operation_id)

    return await request_plan(host, RestartPlan.operation, inventory=inventory, origin=origin, audit=audit,
                              details={}, make_plan=make_plan)


async def apply_restart(plan: RestartPlan, decided: PendingPlan, *, origin: Origin, audit: AuditStore,
                        on_progress: OnProgress | None = None, on_finding: OnFinding | None = None,
                        poll_interval_s: float = POLL_INTERVAL_S, settle_s: float = SETTLE_S) -> OperationResult:
    """Restart an approved plan and prove it; a host that changed since the plan voids it (nothing restarted)."""
    await lock_for_apply(plan, decided, origin.actor, audit)
    try:
        result = await restart(plan, origin=origin, audit=audit, on_progress=on_progress, on_finding=on_finding,
                               request_recorded=True, poll_interval_s=poll_interval_s, settle_s=settle_s)
    except PlanVoid:
        await approvals.close(audit, plan.operation_id, "void")
        raise
    await approvals.close(audit, plan.operation_id, "applied")
    return result
