"""Verify many hosts as one fleet operation: every host's verify linked to it, a bounded fan-out, a deadline each.

The fleet operation's own events say what was asked (the targets, the hosts) and, at the end,
the counts; each host's verify is a full operation of its own (``/audit HOST`` lists it) that
names the fleet operation in its request. A ``FleetRequest`` carries its operation id from the
moment it is asked, so a front-end can show it before the first host is reached.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import NamedTuple

from commands.clock import utc_now
from commands.findings import could_not_check
from commands.fleet.deadline import fleet_deadline_s, not_reached_reason
from commands.fleet.grouping import outcome_of
from commands.fleet.run import run_bounded
from commands.frozen import Frozen
from commands.inventory import FleetSettings
from commands.operation import OnFinding, OperationResult, Origin, new_operation_id
from commands.ssh import bastions_kept
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.verify.causes import CAUSE, Cause
from commands.verify.operation import verify
from commands.verify.plan import FleetPlan, VerifyPlan
from commands.vocabulary import Operation, Verdict

OnHostDone = Callable[[OperationResult], Awaitable[None]]
OnHostFinding = Callable[[str], OnFinding | None]


@dataclass(frozen=True, eq=False, repr=False)
class FleetRequest(Frozen):
    """A fleet verify as asked: the words that named it, each host's plan, and its operation id."""

    target: str  # as asked: "gpu-west", "ct129 ct130", "the 3 not passing in op-…"
    plan: FleetPlan
    operation_id: str = field(default_factory=new_operation_id)


class FleetResult(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    operation_id: str
    operation: str
    target: str  # as asked: "gpu-west", "ct129 ct130"
    started_at: str
    duration_s: float
    results: list[OperationResult]  # one per host, in the order the targets named them

    @property
    def verdict(self) -> Verdict:
        """The worst host's (``Verdict.worst``): a failure outranks a could-not-check, which outranks a pass."""
        return Verdict.worst(result.verdict for result in self.results)

    def counts(self) -> Counter[str]:
        """Hosts per outcome: pass, warn (a pass with a warning), fail, error."""
        return Counter[str](outcome_of(result) for result in self.results)


async def verify_fleet(plans: list[VerifyPlan], *, target: str, origin: Origin, audit: AuditStore,
                       fleet: FleetSettings, on_host_done: OnHostDone | None = None,
                       on_host_finding: OnHostFinding | None = None,
                       operation_id: str | None = None,
                       without_backup: dict[str, str] | None = None,
                       host_slots: AbstractAsyncContextManager[None] | None = None,
                       deadline_s: float | None = None) -> FleetResult:
    """Verify every planned host, ``fleet.max_parallel`` at a time, each within ``fleet.host_deadline_s``, the whole
    within ``deadline_s`` (default ``fleet_deadline_s`` of max_parallel; a host not started in time: could not check);
    ``without_backup`` (from ``plan_fleet``) is recorded with the request: whose files were not compared, why;
    ``host_slots`` (``commands.inflight``), entered around each host's verify, bounds hosts across fleets."""
    operation_id = operation_id or new_operation_id()
    started_at, started = utc_now(), time.monotonic()
    deadline_s = deadline_s or fleet_deadline_s(len(plans), fleet.host_deadline_s, fleet.max_parallel)
    # the last moment a host's verify may start: it then has its whole own deadline before the fleet's
    start_by = asyncio.get_running_loop().time() + deadline_s - fleet.host_deadline_s
    log = audit_log(audit, Operation.VERIFY, operation_id, None, origin.actor)
    await log.requested(origin, fleet={"target": target, "hosts": [plan.host.name for plan in plans],
                                       # what each host is to be compared with: a re-verify of a host
                                       # that never started (an interrupted fleet) reads it here
                                       "backups": {plan.host.name: plan.backup_name for plan in plans},
                                       "max_parallel": fleet.max_parallel,
                                       "host_deadline_s": fleet.host_deadline_s, "deadline_s": deadline_s,
                                       **({"without_backup": without_backup} if without_backup else {})})

    async def one(plan: VerifyPlan) -> OperationResult:
        on_finding = on_host_finding(plan.host.name) if on_host_finding else None
        if host_slots is not None:
            try:
                async with asyncio.timeout_at(start_by):  # waiting for a slot is not the host's deadline: the fleet's
                    await host_slots.__aenter__()
            except TimeoutError:
                return await late(plan)
        try:
            return await verify(plan, origin=origin, audit=audit, on_finding=on_finding,
                                deadline_s=fleet.host_deadline_s, fleet_operation_id=operation_id)
        finally:
            if host_slots is not None:
                await host_slots.__aexit__(None, None, None)

    async def late(plan: VerifyPlan) -> OperationResult:
        """A host whose turn came past the fleet's deadline: each check could not be checked, in the log as any
        host's verify (``/audit HOST`` lists it), never a pass and never left out."""
        result = not_reached(plan, deadline_s)
        host_log = audit_log(audit, Operation.VERIFY, result.operation_id, plan.host.name, origin.actor)
        await host_log.requested(origin, backup=plan.backup_name, checks=plan.check_names(),
                                 fleet_operation_id=operation_id)
        for finding in result.checks:
            await host_log.check(finding)
        await host_log.finished(Finished.of(result))
        if on_finding := (on_host_finding(plan.host.name) if on_host_finding else None):
            for finding in result.checks:
                await on_finding(finding)
        return result

    async def done(_index: int, result: OperationResult) -> None:
        if on_host_done is not None:
            await on_host_done(result)

    async with bastions_kept(plan.host for plan in plans):  # one login to a bastion for the run, however slow
        results = await run_bounded(plans, one, max_parallel=fleet.max_parallel, on_done=done, start_by=start_by,
                                    late=late)
    outcome = FleetResult(operation_id, Operation.VERIFY, target, started_at, time.monotonic() - started, results)
    await log.finished(Finished(outcome.verdict, duration_s=round(outcome.duration_s, 3),
                                counts=dict(sorted(outcome.counts().items())),
                                hosts={result.host: result.operation_id for result in results}))
    return outcome




def not_reached(plan: VerifyPlan, deadline_s: float) -> OperationResult:
    """The result of a host the fleet's deadline left unstarted: the reason on its first check, the rest the same."""
    first, *rest = plan.check_names() or ["verify"]
    findings = [could_not_check(first, not_reached_reason(deadline_s), details={CAUSE: Cause.FLEET_DEADLINE}),
                *(could_not_check(name, f"not checked: the same cause as `{first}`") for name in rest)]
    return OperationResult(new_operation_id(), Operation.VERIFY, plan.host.name, utc_now(), 0.0, findings)
