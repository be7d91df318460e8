"""Verify many hosts as one fleet operation: every host's verify linked to it, a bounded fan-out, a deadline each.

The fleet operation's own events say what was asked (the targets, the hosts) and, at the end,
the counts; each host's verify is a full operation of its own (``/audit HOST`` lists it) that
names the fleet operation in its request. A ``FleetRequest`` carries its operation id from the
moment it is asked, so a front-end can show it before the first host is reached.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from commands.clock import utc_now
from commands.fleet.grouping import outcome_of
from commands.fleet.run import run_bounded
from commands.inventory import FleetSettings
from commands.operation import OnFinding, OperationResult, Origin, new_operation_id
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.verify.operation import verify
from commands.verify.plan import FleetPlan, VerifyPlan
from commands.vocabulary import Operation, Verdict

OnHostDone = Callable[[OperationResult], Awaitable[None]]
OnHostFinding = Callable[[str], OnFinding | None]


@dataclass(frozen=True)
class FleetRequest:
    """A fleet verify as asked: the words that named it, each host's plan, and its operation id."""

    target: str  # as asked: "gpu-west", "ct129 ct130", "the 3 not passing in op-…"
    plan: FleetPlan
    operation_id: str = field(default_factory=new_operation_id)


@dataclass(frozen=True)
class FleetResult:
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
                       host_slots: AbstractAsyncContextManager[None] | None = None) -> FleetResult:
    """Verify every planned host, ``fleet.max_parallel`` at a time, each within ``fleet.host_deadline_s``;
    ``without_backup`` (from ``plan_fleet``) is recorded with the request: whose files were not compared, why;
    ``host_slots`` (``commands.inflight``), entered around each host's verify, bounds hosts across fleets."""
    operation_id = operation_id or new_operation_id()
    started_at, started = utc_now(), time.monotonic()
    log = audit_log(audit, Operation.VERIFY, operation_id, None, origin.actor)
    await log.requested(origin, fleet={"target": target, "hosts": [plan.host.name for plan in plans],
                                       # what each host is to be compared with: a re-verify of a host
                                       # that never started (an interrupted fleet) reads it here
                                       "backups": {plan.host.name: plan.backup_name for plan in plans},
                                       "max_parallel": fleet.max_parallel,
                                       "host_deadline_s": fleet.host_deadline_s,
                                       **({"without_backup": without_backup} if without_backup else {})})

    async def one(plan: VerifyPlan) -> OperationResult:
        on_finding = on_host_finding(plan.host.name) if on_host_finding else None
        async with host_slots or contextlib.nullcontext():  # waiting for a slot is not the host's deadline
            return await verify(plan, origin=origin, audit=audit, on_finding=on_finding,
                                deadline_s=fleet.host_deadline_s, fleet_operation_id=operation_id)

    async def done(_index: int, result: OperationResult) -> None:
        if on_host_done is not None:
            await on_host_done(result)

    results = await run_bounded(plans, one, max_parallel=fleet.max_parallel, on_done=done)
    outcome = FleetResult(operation_id, Operation.VERIFY, target, started_at, time.monotonic() - started, results)
    await log.finished(Finished(outcome.verdict, duration_s=round(outcome.duration_s, 3),
                                counts=dict(sorted(outcome.counts().items())),
                                hosts={result.host: result.operation_id for result in results}))
    return outcome


