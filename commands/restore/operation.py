"""The restore operation end to end: request a plan, apply it once approved, with every step audited.

``request_restore`` plans under the host's lock and stores the plan awaiting a decision;
``apply_restore`` runs an approved plan (its hashes re-checked on the host before anything
is written). The CLI, the Slack app and the demo all drive exactly these two, with the
shared lifecycle of ``commands.plans`` (README "Restore").
"""

from __future__ import annotations

import asyncio
import time

from commands.checks.files import FileCheck
from commands.clock import utc_now
from commands.errors import CouldNotCheck, PlanVoid
from commands.findings import Finding, could_not_check
from commands.inventory import Host, Inventory
from commands.operation import OnFinding, OperationResult, Origin
from commands.plans import PlanRequest, finish, lock_for_apply, request_plan
from commands.restore.apply import ApplyOutcome, apply_plan, snapshot_dir_for
from commands.restore.into_container import inside_check, inside_facts
from commands.restore.plan import RestorePlan, read_plan
from commands.restore.source import backup_source, snapshot_source
from commands.ssh import connect
from commands.store import approvals, locks
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore
from commands.store.log import audit_log
from commands.verify.runner import findings_of
from commands.vocabulary import CheckStatus, PlanState, Verdict


async def request_restore(inventory: Inventory, host: Host, *, backup_name: str | None = None,
                          undo_snapshot: str | None = None, origin: Origin, audit: AuditStore) -> RestorePlan:
    """Plan a restore (or an undo) under the host's lock; a plan with changes awaits approval."""
    source = None if undo_snapshot else backup_source(host, backup_name)

    async def make_plan(operation_id: str) -> RestorePlan:
        async with connect(host) as conn:
            chosen = source or await snapshot_source(conn, undo_snapshot or "")
            return await read_plan(conn, operation_id, chosen)

    def nothing_to_approve(plan: RestorePlan) -> tuple[str, str] | None:
        if plan.unreadable:
            return Verdict.ERROR, "source unreadable"
        return None if plan.changes else (Verdict.PASS, "nothing differs")

    request = PlanRequest.for_host(RestorePlan.operation, host, {"backup": backup_name, "undo": undo_snapshot})
    return await request_plan(request, inventory=inventory, origin=origin, audit=audit, make_plan=make_plan,
                              nothing_to_approve=nothing_to_approve)


async def apply_restore(plan: RestorePlan, decided: PendingPlan, *, actor: str, audit: AuditStore,
                        move_extras: bool, on_step: OnFinding | None = None) -> OperationResult:
    """Apply an approved plan: its stored hashes are re-checked on the host before anything is written."""
    lock = await lock_for_apply(plan, decided, actor, audit)
    started_at, started = utc_now(), time.monotonic()
    findings: list[Finding] = []

    log = audit_log(audit, plan.operation, plan.operation_id, plan.host.name, actor)

    async def record(finding: Finding) -> None:
        findings.append(finding)
        await log.step(finding)
        if on_step:
            await on_step(finding)

    outcome = ApplyOutcome(snapshot_dir_for(plan))
    try:
        try:
            async with connect(plan.host) as conn:
                await apply_plan(conn, plan, outcome, move_extras=move_extras, on_step=record)
        except PlanVoid:
            await approvals.close(audit, plan.operation_id, PlanState.VOID)
            await finish(audit, plan, actor, Verdict.REFUSED, "changed since the plan")
            raise
        except CouldNotCheck as exc:
            await record(could_not_check("apply", f"link lost during the restore: {exc}; each live file is either "
                                         "as it was or fully restored (temp file + rename): see the re-read below"))
            await _reread_after_loss(plan, outcome, record)
        snapshot_dir = outcome.snapshot_dir if any(f.name == "snapshot" for f in findings) else ""
        await approvals.close(audit, plan.operation_id, PlanState.APPLIED)
        result = OperationResult(plan.operation_id, plan.operation, plan.host.name, started_at,
                                 time.monotonic() - started, findings,
                                 extra={"snapshot_dir": snapshot_dir, "restored": outcome.restored})
        await finish(audit, plan, actor, result.verdict, f"restored {len(outcome.restored)} file(s)",
                     {"snapshot_dir": snapshot_dir, "restored": outcome.restored})
        return result
    except (PlanVoid, asyncio.CancelledError):
        raise
    except Exception as exc:  # a bug must not leave the plan open: it is finished, and the host freed below
        await asyncio.shield(finish(audit, plan, actor, Verdict.ERROR, f"the restore stopped on an internal error: "
                                    f"{type(exc).__name__}; run proofbot verify {plan.host.name}"))
        raise
    finally:
        await asyncio.shield(locks.release(audit, lock))


async def _reread_after_loss(plan: RestorePlan, outcome: ApplyOutcome, record: OnFinding) -> None:
    checks = [inside_check(plan.host, f, plan.source.name) if f.inside
              else FileCheck(f.name, plan.source.name, f.source_path, f.live_path) for f in plan.changes]
    try:
        async with connect(plan.host) as conn:  # a file inside the container is re-read inside it
            found = await findings_of(conn, checks, inside_facts(plan.host, [f.live_path for f in plan.changes
                                                                              if f.inside]))
    except CouldNotCheck as exc:
        await record(could_not_check("reread", f"could not reconnect to re-read the files: {exc}; "
                                     "run proofbot verify as soon as the host answers"))
        return
    outcome.restored.clear()  # the re-read, not what was seen before the link dropped, says what is restored
    for check in checks:
        finding = found[check.name]
        if finding.status == CheckStatus.PASS:
            outcome.restored.append(check.file)
        await record(finding)
