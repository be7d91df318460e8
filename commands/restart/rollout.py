"""Rolling restart of a group: one plan over every host, one approval, then hosts restarted in batches.

A rolling restart is a plan over N hosts in the shared lifecycle (``commands.plans``), not a
lifecycle of its own. ``rollout_request`` judges the request once (every host has a service;
``admit`` then refuses when one is busy). ``request_rollout`` reads every host's running
service concurrently (``fleet.max_parallel`` at a time, each within ``fleet.host_deadline_s``)
into ONE plan listing each host's main PID and command line; a host that cannot be read
refuses the plan, naming it. ``apply_rollout`` goes through ``begin_apply``: the approved
hash, every host's lock at once (a busy host refuses the rollout, naming the holder: nobody
else restarts or restores a host of the group mid-rollout) and one re-read of every host (a
changed PID voids the plan, nothing restarted). Then ``fleet.restart_batch`` hosts at a time
go through the single-host path (``commands.restart.act.restart``: the same proof, the same
audit events, each per-host operation naming the rollout as ``fleet_operation_id``). The
first batch restarts on the state just re-read; a later batch's host is read once more just
before its restart (time has passed: one that changed meanwhile is left untouched). The
first host not proven halts it: the rest of its batch finishes, later batches are never
touched (README "Restart", "Rolling restart").

Locks are taken at apply, not while the plan waits: a pending plan must not freeze a whole
group for ``expire_after_s``, and the PID re-check voids whatever changed meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from commands.clock import utc_now
from commands.errors import CouldNotCheck, PlanVoid, Refused, UsageError
from commands.fleet.deadline import fleet_deadline_s
from commands.fleet.run import run_bounded
from commands.inventory import FleetSettings, Host, Inventory
from commands.operation import OperationResult, Origin
from commands.plans import Decidable, PlanRequest, admit, begin_apply, hash_of, request_plan
from commands.redact import redact_data
from commands.restart.act import COMMAND_GRACE_S, POLL_INTERVAL_S, SETTLE_S, Halt, NotSent, changes_since, restart
from commands.restart.plan import RestartPlan, ServiceSnapshot, plan_restart, read_snapshot
from commands.restart.progress import OnProgress
from commands.ssh import bastions_kept, connect
from commands.store import approvals, locks
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.vocabulary import CheckStatus, Operation, Outcome, PlanState, Verdict

OPERATION = Operation.ROLLOUT
HostState = Literal["done", "failed", "untouched"]
OnHostStart = Callable[[str, int, int], Awaitable[None]]  # (host, batch number, batches)
OnHostDone = Callable[["HostOutcome"], Awaitable[None]]
OnHostProgress = Callable[[str], OnProgress | None]


@dataclass(frozen=True)
class RolloutPlan(Decidable):
    """Every host's restart plan (its own operation id and the process it was planned against)."""

    operation: ClassVar[str] = OPERATION
    operation_id: str
    target: str
    restart_batch: int
    hosts: tuple[RestartPlan, ...]
    created_at: str = field(default_factory=utc_now)
    # What the re-read at apply found, host by host (set by ``recheck``; not part of the plan).
    reread: dict[str, ServiceSnapshot] = field(default_factory=dict, compare=False, repr=False)

    @property
    def audit_host(self) -> str | None:
        return None

    @property
    def apply_hosts(self) -> tuple[str, ...]:
        return tuple(plan.host.name for plan in self.hosts)

    def content(self) -> dict[str, Any]:
        return {"target": self.target, "restart_batch": self.restart_batch,
                "hosts": [{"operation_id": plan.operation_id, **plan.content()} for plan in self.hosts]}

    @property
    def plan_hash(self) -> str:
        return hash_of(self.content())

    def to_json(self) -> dict[str, Any]:
        """As shown and stored; each host's part is its restart plan as stored (masked, without the
        plan's raw evidence: the PID and cmdline shown are it)."""
        return redact_data({"operation_id": self.operation_id, "operation": self.operation,
                            "created_at": self.created_at, "plan_hash": self.plan_hash, "target": self.target,
                            "restart_batch": self.restart_batch, "hosts": [plan.to_json() for plan in self.hosts]})

    @classmethod
    def rebuild_from(cls, inventory: Inventory, pending: PendingPlan) -> RolloutPlan:
        """Rebuilt against today's inventory: a host gone or changed in it voids the plan."""
        data = pending.details
        plans = []
        for entry in data.get("hosts", []):
            host = inventory.hosts.get(str(entry.get("host")))
            if host is None:
                raise PlanVoid(f"plan void: {entry.get('host')} is no longer in the inventory",
                               hint="request a new plan")
            plans.append(RestartPlan.from_json(entry, host))
        return cls(str(data["operation_id"]), str(data["target"]), int(data["restart_batch"]), tuple(plans),
                   str(data["created_at"]))

    async def recheck(self, fleet: FleetSettings) -> None:
        """Every host still runs the planned process (one read each, bounded); else the whole plan is void."""
        by_name = {plan.host.name: plan for plan in self.hosts}

        async def read(host: Host) -> ServiceSnapshot:
            async with connect(host) as conn:
                snapshot, _ = await read_snapshot(conn, by_name[host.name].service)
            return snapshot

        hosts = [plan.host for plan in self.hosts]
        nows = await _read_all(hosts, fleet, read)
        _unreadable(nows, "plan void, nothing restarted")
        changed = [f"{host.name}: " + "; ".join(diff) for host, now in zip(hosts, nows, strict=True)
                   if isinstance(now, ServiceSnapshot) and (diff := changes_since(by_name[host.name].before, now))]
        if changed:
            raise PlanVoid(f"plan void, nothing restarted: {len(changed)} host(s) changed since the plan: "
                           + "; ".join(changed[:10]), hint="request a new plan")
        self.reread.update({host.name: now for host, now in zip(hosts, nows, strict=True)
                            if isinstance(now, ServiceSnapshot)})

    def batches(self) -> list[tuple[RestartPlan, ...]]:
        size = self.restart_batch
        return [self.hosts[start:start + size] for start in range(0, len(self.hosts), size)]


@dataclass(frozen=True)
class HostOutcome:
    """One host of a rollout: proven (done), restarted but not proven (failed), or never restarted."""

    host: str
    state: HostState
    result: OperationResult | None = None  # None: never restarted
    reason: str = ""  # why untouched, or what failed

    @classmethod
    def restarted(cls, host: str, result: OperationResult) -> HostOutcome:
        """Done when proven, else failed, saying its first failed check (a failure before a could-not-check)."""
        failed = [f for f in result.checks if CheckStatus(f.status) in (CheckStatus.FAIL, CheckStatus.ERROR)]
        failed.sort(key=lambda f: CheckStatus(f.status) != CheckStatus.FAIL)
        state: HostState = "done" if Verdict(result.verdict) == Verdict.PASS else "failed"
        return cls(host, state, result, f"{failed[0].name}: {failed[0].summary}" if failed else "")

    @property
    def verdict(self) -> Verdict:
        """A host never restarted was refused (it changed since the plan, or was not reached)."""
        return Verdict(self.result.verdict) if self.result is not None else Verdict.REFUSED

    def to_json(self) -> dict[str, Any]:
        if self.result is not None:
            return {**self.result.to_json(), "rollout_state": self.state}
        return {"host": self.host, "operation": Operation.RESTART, "verdict": None, "rollout_state": self.state,
                "reason": self.reason}


@dataclass(frozen=True)
class RolloutResult:
    operation_id: str
    target: str
    started_at: str
    duration_s: float
    hosts: list[HostOutcome]  # in the plan's order
    halted: str  # "" when every host was reached

    def named(self, state: HostState) -> list[str]:
        return [outcome.host for outcome in self.hosts if outcome.state == state]

    @property
    def verdict(self) -> Verdict:
        """The worst host's (``Verdict.worst``): a failed proof, then a could-not-check, then a host refused
        (changed since the plan, or never reached); pass only when every host was restarted and proven."""
        return Verdict.worst(outcome.verdict for outcome in self.hosts)

    @property
    def warned(self) -> bool:
        """A host passed with a warning (``--strict`` fails it)."""
        return any(Outcome.of(o.result.verdict, (f.status for f in o.result.checks)) == Outcome.WARN
                   for o in self.hosts if o.result is not None)

    def counts(self) -> Counter[str]:
        return Counter(outcome.state for outcome in self.hosts)

    def to_json(self) -> dict[str, Any]:
        return {"operation": Operation.RESTART, "target": self.target, "verdict": self.verdict,
                "operation_id": self.operation_id, "started_at": self.started_at,
                "duration_s": round(self.duration_s, 3), "halted": self.halted or None,
                "done": self.named("done"), "failed": self.named("failed"), "untouched": self.named("untouched"),
                "hosts": [outcome.to_json() for outcome in self.hosts]}


def rollout_request(inventory: Inventory, target: str) -> PlanRequest:
    """The group's hosts, judged once: every one must have a service (else refused, naming them)."""
    hosts = inventory.targets([target])
    without = [host.name for host in hosts if host.service is None]
    if without:
        raise UsageError(f"{target}: {len(without)} host(s) have no service in the inventory: "
                         + ", ".join(without[:20]) + (" …" if len(without) > 20 else ""),
                         hint="add hosts.<name>.service, or restart a group without them")
    fleet = inventory.fleet
    names = tuple(host.name for host in hosts)
    return PlanRequest(OPERATION, target, names, None, False, {"fleet": {
        "target": target, "hosts": list(names), "restart_batch": fleet.restart_batch,
        "max_parallel": fleet.max_parallel, "host_deadline_s": fleet.host_deadline_s}})


async def _read_all(hosts: list[Host], fleet: FleetSettings,
                    read: Callable[[Host], Awaitable[Any]]) -> list[Any | str]:
    """``read(host)`` for every host, bounded; a host that fails or passes its deadline gives a string
    saying why, so one unreachable host is named, never holding the others."""
    async def one(host: Host) -> Any | str:
        try:
            async with asyncio.timeout(fleet.host_deadline_s):
                return await read(host)
        except TimeoutError:
            return f"{host.name}: timed out after {fleet.host_deadline_s:g} s (fleet.host_deadline_s)"
        except CouldNotCheck as exc:
            return str(exc) if host.name in str(exc) else f"{host.name}: {exc}"
    return await run_bounded(hosts, one, max_parallel=fleet.max_parallel)


def _unreadable(results: list[Any], words: str) -> None:
    problems = [result for result in results if isinstance(result, str)]
    if problems:
        shown = "; ".join(problems[:10]) + (f"; … {len(problems) - 10} more" if len(problems) > 10 else "")
        raise Refused(f"{words}: {len(problems)} host(s) could not be read: {shown}",
                      hint="nothing was restarted; fix or leave out those hosts and ask again")


async def plan_rollout(inventory: Inventory, request: PlanRequest, operation_id: str) -> RolloutPlan:
    """Read every host's service (bounded, a deadline each); nothing on any host changes."""
    fleet = inventory.fleet
    plans = await _read_all([inventory.hosts[name] for name in request.hosts], fleet, plan_restart)
    _unreadable(plans, f"no plan for {request.subject}")
    return RolloutPlan(operation_id, request.subject, fleet.restart_batch,
                       tuple(replace(plan, evidence=()) for plan in plans if isinstance(plan, RestartPlan)))


async def request_rollout(inventory: Inventory, target: str | PlanRequest, *, origin: Origin,
                          audit: AuditStore) -> RolloutPlan:
    """Plan a rolling restart of a group; it awaits one approval. ``target``: the group's name (judged
    here), or the request a front-end already admitted (``admit_restart``), not judged again."""
    request = target if isinstance(target, PlanRequest) else await admit(audit, rollout_request(inventory, target))

    async def make_plan(operation_id: str) -> RolloutPlan:
        return await plan_rollout(inventory, request, operation_id)

    return await request_plan(request, inventory=inventory, origin=origin, audit=audit, make_plan=make_plan)


class _Rollout:
    """One approved rollout: its locks, its events, its hosts' outcomes."""

    def __init__(self, plan: RolloutPlan, origin: Origin, audit: AuditStore) -> None:
        self.plan, self.origin, self.audit = plan, origin, audit
        self.log = audit_log(audit, OPERATION, plan.operation_id, None, origin.actor)
        self.locks: dict[str, locks.LockHolder] = {}
        self.outcomes: dict[str, HostOutcome] = {}
        self.started_at, self.started = utc_now(), time.monotonic()

    async def release_untaken(self) -> None:
        for host, lock in list(self.locks.items()):
            await locks.release(self.audit, lock)
            del self.locks[host]


async def apply_rollout(plan: RolloutPlan, decided: PendingPlan, *, origin: Origin, audit: AuditStore,
                        fleet: FleetSettings, on_host_start: OnHostStart | None = None,
                        on_host_done: OnHostDone | None = None, on_host_progress: OnHostProgress | None = None,
                        poll_interval_s: float = POLL_INTERVAL_S, settle_s: float = SETTLE_S) -> RolloutResult:
    """Restart an approved rolling plan batch by batch, halting at the first host not proven.

    Raises ``Refused`` (not approved, a host busy, unreadable or changed since the plan) with nothing restarted
    (``begin_apply``). ``fleet`` gives the deadline and fan-out of the re-read; the batch size is the plan's own.
    """
    # one login to each bastion for the run, however slow its writes and posts between batches; not past its bound
    async with bastions_kept((p.host for p in plan.hosts), at_most_s=rollout_deadline_s(plan, fleet)):
        run = _Rollout(plan, origin, audit)
        taken = await begin_apply(plan, decided, origin.actor, audit, fleet=fleet, channel=origin.channel,
                                  thread_ts=origin.thread_ts)
        run.locks = {lock.host: lock for lock in taken}
        try:  # the locks still held are freed only after ``finished``: until then the rollout always holds one,
            # so a replica killed mid-rollout leaves a lease that ends, and another interrupts the rollout
            try:
                halted = await _batches(run, on_host_start, on_host_done, on_host_progress, poll_interval_s, settle_s)
            except BaseException as exc:
                await asyncio.shield(run.log.interrupted(repr(exc), outcomes={
                    host: outcome.state for host, outcome in run.outcomes.items()}))
                raise
            for restart_plan in plan.hosts:
                run.outcomes.setdefault(restart_plan.host.name, HostOutcome(
                    restart_plan.host.name, "untouched", reason=f"not reached: {halted}"))
            result = RolloutResult(plan.operation_id, plan.target, run.started_at, time.monotonic() - run.started,
                                   [run.outcomes[p.host.name] for p in plan.hosts], halted)
            await approvals.close(audit, plan.operation_id, PlanState.APPLIED)
            await run.log.finished(Finished(
                result.verdict, duration_s=round(result.duration_s, 3), counts=dict(sorted(result.counts().items())),
                hosts={o.host: o.result.operation_id for o in result.hosts if o.result is not None},
                extra={"halted": halted or None, "done": result.named("done"), "failed": result.named("failed"),
                       "untouched": result.named("untouched")}))
        finally:
            await run.release_untaken()
        return result


def rollout_deadline_s(plan: RolloutPlan, fleet: FleetSettings) -> float:
    """A rollout with every step at its bound: the apply's re-read (a fleet deadline), then per batch its slowest
    restart (``ready_timeout_s`` and the command's grace) and a ``host_deadline_s`` to connect, re-read and prove."""
    return (fleet_deadline_s(len(plan.hosts), fleet.host_deadline_s, fleet.max_parallel)
            + sum(max(p.service.ready_timeout_s for p in batch) + COMMAND_GRACE_S + fleet.host_deadline_s
                  for batch in plan.batches()))


async def _batches(run: _Rollout, on_host_start: OnHostStart | None, on_host_done: OnHostDone | None,
                   on_host_progress: OnHostProgress | None, poll_interval_s: float, settle_s: float) -> str:
    """Each batch restarted concurrently and proven; returns why it halted ("" when it did not).

    A part that raises (its write not taken: ``CouldNotRecord``) cancels none of its batch: a host whose restart
    was sent is carried to its verdict (or to its own unrecorded-write ending), one not yet sent is not sent
    (``NotSent``), and once the batch is over the first such error is raised (the rollout is interrupted)."""
    batches = run.plan.batches()
    for number, batch in enumerate(batches, 1):
        await run.log.step("batch", batch=number, of=len(batches), hosts=[p.host.name for p in batch])
        failed = _Failed()

        async def one(host_plan: RestartPlan, number: int = number, failed: _Failed = failed) -> HostOutcome | None:
            try:
                return await _one_host(run, host_plan, number, len(batches), failed.why, on_host_start,
                                       on_host_done, on_host_progress, poll_interval_s, settle_s)
            except Exception as exc:  # said once the batch is over; cancelling its siblings would leave them unknown
                failed.parts.append((host_plan.host.name, exc))
                return None

        outcomes = await run_bounded(list(batch), one, max_parallel=len(batch))
        if failed.parts:
            raise failed.parts[0][1]
        bad = [o for o in outcomes if o is not None and o.state != "done"]
        if bad:
            rest = [o.host for o in outcomes if o is not None and o not in bad]
            why = ", ".join(f"{o.host} {_what_went_wrong(o)}" for o in bad)
            halted = (f"halted after batch {number} of {len(batches)}: {why}"
                      + (f"; the rest of that batch finished ({', '.join(rest)})" if rest else ""))
            await run.log.step("halted", batch=number, reason=halted)
            return halted
    return ""


@dataclass
class _Failed:
    """The parts of one batch that raised, first first: from then on no host of it is sent its restart."""

    parts: list[tuple[str, Exception]] = field(default_factory=list)

    def why(self) -> str | None:
        if not self.parts:
            return None
        host, exc = self.parts[0]
        return f"{host}'s part of the rollout could not go on ({exc})"


async def _one_host(run: _Rollout, host_plan: RestartPlan, number: int, batches: int, halt: Halt,
                    on_host_start: OnHostStart | None, on_host_done: OnHostDone | None,
                    on_host_progress: OnHostProgress | None, poll_interval_s: float, settle_s: float) -> HostOutcome:
    """One host of batch ``number``: handed its lock, restarted through the single-host path, given back."""
    name = host_plan.host.name
    if on_host_start is not None:
        await on_host_start(name, number, batches)
    lock = await locks.hand_over(run.audit, run.locks.pop(name), host_plan.operation_id, Operation.RESTART)
    try:  # the first batch restarts on the state the apply just re-read; a later one re-reads first
        result = await restart(host_plan, origin=run.origin, audit=run.audit,
                               on_progress=on_host_progress(name) if on_host_progress else None,
                               poll_interval_s=poll_interval_s, settle_s=settle_s,
                               fleet_operation_id=run.plan.operation_id,
                               checked=run.plan.reread.get(name) if number == 1 else None, halt=halt)
    except (PlanVoid, NotSent) as void:  # NotSent: a sibling failed before this host's restart was sent
        outcome = HostOutcome(name, "untouched", reason=void.message)
    else:
        outcome = HostOutcome.restarted(name, result)
    finally:  # restart() gave the host back to the rollout when it ended (this is a no-op then), or
        # never got that far; the last batch's hosts are kept, freed after the rollout's ``finished``
        back = await locks.hand_over(run.audit, lock, run.plan.operation_id, OPERATION)
        if number == batches:
            run.locks[name] = back
        else:
            await locks.release(run.audit, back)
    run.outcomes[name] = outcome
    if on_host_done is not None:
        await on_host_done(outcome)
    return outcome


def _what_went_wrong(outcome: HostOutcome) -> str:
    if outcome.state == "untouched":
        return "was not restarted (changed since the plan)"
    return "could not be checked" if outcome.verdict == Verdict.ERROR else "failed its proof"
