"""The restore operation end to end: lock, plan, approval, apply, proof, audit.

``request_restore`` takes the host's lock and stores the plan awaiting a decision;
``apply_restore`` runs an approved plan; ``close_unapplied`` ends a rejected, expired
or abandoned one. The CLI and the Slack app both drive exactly these three.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from commands.checks.files import file_hash_argv, parse_file_hash
from commands.errors import CouldNotCheck, Locked
from commands.findings import Finding, could_not_check
from commands.inventory import Host, Inventory
from commands.operation import OperationResult, Origin, new_operation_id, utc_now
from commands.restore.apply import ApplyOutcome, PlanVoid, apply_plan, snapshot_dir_for
from commands.restore.plan import RestorePlan, backup_source, plan_from_json, read_plan, snapshot_source
from commands.ssh import connect
from commands.store import approvals, locks
from commands.store.events import AuditStore

OnStep = Callable[[Finding], Awaitable[None]]


async def request_restore(inventory: Inventory, host: Host, *, backup_name: str | None = None,
                          undo_snapshot: str | None = None, origin: Origin, audit: AuditStore) -> RestorePlan:
    """Plan a restore (or an undo) under the host's lock; a plan with changes awaits approval."""
    operation_id = new_operation_id()
    source = None if undo_snapshot else backup_source(host, backup_name)
    lock = await locks.acquire(audit, host.name, operation_id, "restore", origin.actor, origin.channel,
                               origin.thread_ts)
    kept = False
    try:
        await audit.append("requested", operation_id=operation_id, operation="restore", host=host.name,
                           actor=origin.actor,
                           details={"backup": backup_name, "undo": undo_snapshot, "origin": origin.to_json()})
        async with connect(host) as conn:
            if source is None:
                source = await snapshot_source(conn, undo_snapshot or "")
            plan = await read_plan(conn, operation_id, source)
        await audit.append("plan-shown", operation_id=operation_id, operation="restore", host=host.name,
                           actor=origin.actor, details=plan.to_json())
        if plan.changes and not plan.unreadable:
            await approvals.create(audit, plan_id=operation_id, operation="restore", host=host.name,
                                   requested_by=origin.actor, plan_hash=plan.plan_hash, details=plan.to_json(),
                                   approvals=inventory.approvals, channel=origin.channel,
                                   message_ts=origin.thread_ts)
            kept = True
        else:
            verdict = "error" if plan.unreadable else "pass"
            await _finish(audit, plan.operation_id, host.name, origin.actor, verdict,
                          "source unreadable" if plan.unreadable else "nothing differs")
        return plan
    except BaseException as exc:
        await _finish(audit, operation_id, host.name, origin.actor, "error", f"planning failed: {exc}")
        raise
    finally:
        if not kept:
            await locks.release(audit, lock)


async def apply_restore(inventory: Inventory, plan_id: str, *, actor: str, audit: AuditStore, move_extras: bool,
                        on_step: OnStep | None = None) -> OperationResult:
    """Apply an approved plan: its stored hashes are re-checked on the host before anything is written."""
    pending = await approvals.get(audit, plan_id)
    host = inventory.host(pending.host)
    plan = plan_from_json(host, pending.details)
    try:
        lock = await locks.hold_for(audit, host.name, plan_id, "restore", actor)
    except Locked:
        await approvals.close(audit, plan_id, "void")
        raise
    started_at, started = utc_now(), time.monotonic()
    findings: list[Finding] = []

    async def record(finding: Finding) -> None:
        findings.append(finding)
        await audit.append("step", operation_id=plan_id, operation="restore", host=host.name, actor=actor,
                           details=finding.to_json())
        if on_step:
            await on_step(finding)

    outcome = ApplyOutcome(snapshot_dir_for(plan))
    try:
        if plan.plan_hash != pending.plan_hash:
            raise PlanVoid("plan void: the inventory changed since the plan was shown", hint="request a new plan")
        async with connect(host) as conn:
            await apply_plan(conn, plan, outcome, move_extras=move_extras, on_step=record)
    except PlanVoid:
        await approvals.close(audit, plan_id, "void")
        await _finish(audit, plan_id, host.name, actor, "void", "changed since the plan")
        await locks.release(audit, lock)
        raise
    except CouldNotCheck as exc:
        await record(could_not_check("apply", f"link lost during the restore: {exc}; each live file is either "
                                     "as it was or fully restored (temp file + rename): see the re-read below"))
        await _reread_after_loss(plan, record)
    restored = [f.name for f in plan.changes if _last_status(findings, f"file:{f.name}") == "pass"]
    snapshot_dir = outcome.snapshot_dir if any(f.name == "snapshot" for f in findings) else ""
    await approvals.close(audit, plan_id, "applied")
    result = OperationResult(plan_id, "restore", host.name, started_at, time.monotonic() - started, findings,
                             extra={"snapshot_dir": snapshot_dir, "restored": restored})
    await _finish(audit, plan_id, host.name, actor, result.verdict, f"restored {len(restored)} file(s)",
                  {"snapshot_dir": snapshot_dir, "restored": restored})
    await locks.release(audit, lock)
    return result


def _last_status(findings: list[Finding], name: str) -> str | None:
    return next((f.status for f in reversed(findings) if f.name == name), None)


async def _reread_after_loss(plan: RestorePlan, record: OnStep) -> None:
    try:
        async with connect(plan.host) as conn:
            results = await conn.run_batch([file_hash_argv(f.source_path, f.live_path) for f in plan.changes])
    except CouldNotCheck as exc:
        await record(could_not_check("reread", f"could not reconnect to re-read the files: {exc}; "
                                     "run proofbot verify as soon as the host answers"))
        return
    for f, result in zip(plan.changes, results, strict=True):
        await record(parse_file_hash(f.name, plan.source.name, f.source_path, f.live_path, result))


async def _finish(audit: AuditStore, operation_id: str, host: str, actor: str, verdict: str, summary: str,
                  extra: dict[str, object] | None = None) -> None:
    await audit.append("finished", operation_id=operation_id, operation="restore", host=host, actor=actor,
                       details={"verdict": verdict, "summary": summary, **(extra or {})})
