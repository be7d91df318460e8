"""The verify operation: every check of README "Checks" against one host, over one SSH connection.

The plan's checks (``VerifyPlan.checks``) run through the one runner (``commands.verify.runner``):
host-side facts in ONE exec round trip (service state, and what needs the main PID, which the
host-side script reads itself: see ``commands.checks.pid_read``; hashes, the file listing and
package probes), with health and the probe fetched over SSH channels meanwhile.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from collections.abc import Awaitable, Callable

from commands.checks.check import Check
from commands.clock import utc_now
from commands.errors import CouldNotCheck
from commands.findings import Finding, could_not_check
from commands.operation import OnFinding, OperationResult, Origin, new_operation_id
from commands.ssh import BatchStep, HostConnection, connect
from commands.store.db import AuditStore
from commands.store.events import Event
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.verify.causes import cause_of, timed_out
from commands.verify.next_steps import with_next_step
from commands.verify.plan import VerifyPlan
from commands.verify.runner import batch_of, finding_groups
from commands.vocabulary import Operation


async def verify(plan: VerifyPlan, *, origin: Origin, audit: AuditStore,
                 on_finding: OnFinding | None = None, deadline_s: float | None = None,
                 fleet_operation_id: str | None = None) -> OperationResult:
    """Run every planned check, record each in the audit log, and return the result.

    With ``deadline_s`` the host's whole verify (connecting included) ends by then: what it
    had shown stays, every check not yet done is ``error`` "timed out after N s". A verify
    that is part of a fleet operation names it (``fleet_operation_id``) in its request.
    """
    operation_id = new_operation_id()
    started_at, started = utc_now(), time.monotonic()
    host = plan.host
    # The request is written while the SSH handshake is in flight (a login, no command): every
    # command and every finding waits for it, so the log still says what was asked first.
    logged = asyncio.ensure_future(audit_log(audit, Operation.VERIFY, operation_id, host.name, origin.actor).requested(
        origin, backup=plan.backup_name, checks=plan.check_names(), fleet_operation_id=fleet_operation_id))
    try:
        return await _verified(plan, operation_id, started_at, started, logged, origin=origin, audit=audit,
                               on_finding=on_finding, deadline_s=deadline_s)
    finally:
        if not logged.done():
            await asyncio.gather(logged, return_exceptions=True)


async def _verified(plan: VerifyPlan, operation_id: str, started_at: str, started: float,
                    logged: asyncio.Future[Event], *, origin: Origin, audit: AuditStore,
                    on_finding: OnFinding | None, deadline_s: float | None) -> OperationResult:
    host = plan.host
    findings: list[Finding] = []
    stats = {"connections": 0, "exec_round_trips": 0}
    log = audit_log(audit, Operation.VERIFY, operation_id, host.name, origin.actor)
    ended: list[OperationResult] = []  # the result, once the last findings are logged with the ending

    def result_now() -> OperationResult:
        return OperationResult(operation_id, Operation.VERIFY, host.name, started_at, time.monotonic() - started,
                               findings, stats=stats)

    async def found(*group: Finding, last: bool = False) -> None:
        """Findings known together: logged in one transaction, then shown, each in order. The ``last`` (no check
        is left to run) are logged with the verify's ending: one COMMIT, not two, per host (issue 27)."""
        await logged
        group = tuple(with_next_step(finding, plan) for finding in group)
        findings.extend(group)
        if last:
            result = result_now()
            await log.checks(group, ending=Finished.of(result))
            ended.append(result)
        else:
            await log.checks(group)
        if on_finding:
            for finding in group:
                await on_finding(finding)

    async def checked() -> None:
        # h11 (health, probe) loads in a worker thread while SSH connects: nothing needs it sooner (a process
        # that has it already, the CLI's or a serve's after its first verify, starts no task and no thread for it).
        http = asyncio.ensure_future(_load_host_http()) if HOST_HTTP not in sys.modules else None
        try:
            async with connect(host, idempotent=True) as conn:  # only reads: sent again if a pooled link was dead
                stats["connections"] += 1
                await logged
                if http is not None:
                    await http
                try:
                    await _gather(plan, conn, found)
                finally:
                    stats["exec_round_trips"] = conn.exec_round_trips
        finally:
            if http is not None:
                if not http.done():
                    http.cancel()  # the thread finishes the import by itself; nobody waits for it
                await asyncio.gather(http, return_exceptions=True)

    cause: tuple[str, dict[str, str]] | None = None
    try:
        if deadline_s is None:
            await checked()
        else:
            async with asyncio.timeout(deadline_s):
                await checked()
    except CouldNotCheck as exc:
        cause = cause_of(exc)
    except TimeoutError:
        cause = timed_out(deadline_s or 0.0)
    if ended:  # every check done and recorded with the ending: what closing the connection said changes nothing
        return ended[0]
    if cause is not None:
        said, details = cause
        done = {finding.name for finding in findings}
        left = [name for name in plan.check_names() if name not in done]
        first, *rest = left or [""]
        if left:  # the cause is said once (and its next step given once), on the first check it stopped
            await found(could_not_check(first, said, details=details),
                        *(could_not_check(name, f"not checked: the same cause as `{first}`") for name in rest))
    result = result_now()
    await logged
    await log.finished(Finished.of(result))
    return result


HOST_HTTP = "commands.host_http"


async def _load_host_http() -> None:
    if HOST_HTTP not in sys.modules:
        await asyncio.to_thread(importlib.import_module, HOST_HTTP)


async def _gather(plan: VerifyPlan, conn: HostConnection, found: Callable[..., Awaitable[None]]) -> None:
    """Every check of the plan through the one runner: the host's facts in one round trip, health and the
    probe (one real request, when the host has one) over SSH channels meanwhile; the findings known
    together are passed on together."""
    async for group in finding_groups(conn, plan.checks(), plan.facts()):
        await found(*group, last=group.last)


def host_batch(plan: VerifyPlan) -> list[BatchStep]:
    """Every host-side command of plan's verify, as the one batch runs them."""
    return batch_of([*plan.facts(), *(check for check in plan.checks() if isinstance(check, Check))])
