"""Restart, act and verify: send the restart, then watch until every signal proves it, over one connection.

``restart(plan)`` (called by ``apply_restart`` once a plan is approved, or directly by
tests and benchmarks) takes the host's lock, re-reads the host and refuses if the process is no longer the
planned one, records the before-state, sends ``systemctl restart UNIT`` /
``supervisorctl restart NAME`` and, while that command runs and after it returns, polls
every ``poll_interval_s`` (one exec round trip for the manager's state and a new
process's cmdline, one health request over an SSH channel) until ALL signals are
green: the restart command exited 0, a NEW main PID (and on systemd a new InvocationID),
the unit active, health 200, every expected flag present and no forbidden one.

``ready_after_s`` is the seconds from just before the restart command was sent to the
end of the first poll at which every signal was green. Polls start at once and repeat
every ``poll_interval_s`` (at once again when the command returns or a new PID
appears), so it overstates the true moment by at most one interval plus one poll
(a round trip and a health request). After that the probe (if any) is sent, and polling
goes on for ``settle_s`` so a process that dies right after turning green is a crash
loop, not a pass. A restart command without an exit status is an error, never a pass.

A container (``commands.restart.container``: ``docker restart``, ``docker-compose restart``) is green only
once its new run (a StartedAt later than the host's clock just before the command, a PID > 0) has been up
``min_uptime_s``; that window is its settle. A crash loop or a run that ended with no restart coming ends the
watch ``settle_s`` after it was seen (time for more exit codes), never at the deadline; so does a green process
seen dead while settling (its manager's next start is what names the loop).
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from commands.checks.check import HttpRequest, Read, Reads
from commands.checks.cmdline import cmdline_argv
from commands.checks.engine_guard import guarded
from commands.checks.managers import checks_for
from commands.clock import utc_at, utc_now
from commands.command_result import CommandResult
from commands.errors import CommandTimedOut, CouldNotCheck, CouldNotRecord, Locked, PlanVoid, Refused
from commands.findings import Finding
from commands.host_http import fetch_via_host
from commands.operation import OnFinding, OperationResult, Origin
from commands.restart.container import ACTS, is_container, look_of
from commands.restart.plan import RestartPlan, ServiceSnapshot, read_snapshot, restart_argv
from commands.restart.progress import OnProgress, ProgressSink
from commands.restart.runs import ContainerRuns
from commands.restart.verdict import check_names, restart_findings
from commands.restart.watch import Phase, Poll, Watch
from commands.ssh import HostConnection, connect
from commands.store import locks
from commands.store.db import AuditStore
from commands.store.kinds import Finished, Refusal
from commands.store.log import audit_log
from commands.store.recovery import RESTART_SENT
from commands.verify.runner import ask, read_facts
from commands.vocabulary import CheckStatus, CommandState, Operation, Signal

POLL_INTERVAL_S = 0.25
SETTLE_S = 3.0
POLL_HEALTH_TIMEOUT_S = 2.0
COMMAND_GRACE_S = 30.0  # the restart command's own SSH timeout is ready_timeout_s plus this
UPTIME_MARGIN_S = 0.05  # a container's proving poll reads the host's clock this long after min_uptime_s
START_TOLERANCE_S = 0.5  # same PID, start time this far off: another process reused the PID
CMDLINE = "cmdline"
Halt = Callable[[], str | None]  # why a restart not yet sent must not be sent now (None: go on)


class NotSent(Refused):
    """The restart command was never sent: ``halt`` said stop (a rollout's sibling part could not be recorded)
    before it was. The part ends refused; its host runs as it did."""


def not_recorded(host: str, exc: CouldNotRecord) -> CouldNotRecord:
    """``restart-sent`` is written before the command is sent: when the database does not take it, nothing
    was sent, and the user is told so (the operation is settled interrupted once the database is back)."""
    return CouldNotRecord(f"not restarted: proofbot could not record it, so the restart of {host} was never "
                          f"sent ({exc.message})",
                          hint=f"{host}'s service runs as before, same PID; ask again once the audit database "
                               "takes writes (proofbot reconnects by itself)")


async def restart(plan: RestartPlan, *, origin: Origin, audit: AuditStore, on_progress: OnProgress | None = None,
                  on_finding: OnFinding | None = None, request_recorded: bool = False,
                  poll_interval_s: float = POLL_INTERVAL_S, settle_s: float = SETTLE_S,
                  fleet_operation_id: str | None = None, checked: ServiceSnapshot | None = None,
                  halt: Halt | None = None) -> OperationResult:
    """Restart the planned service and prove it came back right; every step goes to the audit log.

    Raises ``Locked`` (another mutating operation holds the host) or ``PlanVoid``
    (the host changed since the plan): both are ``Refused`` and nothing was restarted.
    ``request_recorded``: the caller already appended ``requested`` for plan.operation_id
    (e.g. when it showed the plan for approval). A restart that is one host of a rolling restart
    names the rollout (``fleet_operation_id``) in its request; ``checked``: the host's state as the caller
    re-read it a moment ago against the plan (a rollout's first batch), so it is not read again. ``halt``: asked
    just before the command would be sent; a reason there ends the restart ``NotSent`` (refused, nothing sent).
    """
    run = _Run(plan, origin, audit, on_progress, poll_interval_s, settle_s)
    run.checked, run.halt = checked, halt
    if not request_recorded:
        await run.log.requested(origin, plan_hash=plan.plan_hash, plan=plan.to_json(), checks=check_names(plan),
                                fleet_operation_id=fleet_operation_id)
    try:
        lock = await locks.hold_for(audit, plan.host.name, plan.operation_id, Operation.RESTART, origin.actor,
                                    origin.channel, origin.thread_ts)
    except Locked as exc:
        await run.log.refused(Refusal(str(exc), holder=exc.holder))
        raise
    unrecorded = False
    try:  # the host is given up only after ``finished``: a process killed before it leaves a lease that ends
        try:
            await run.execute()
        except (PlanVoid, NotSent) as exc:
            await run.log.refused(Refusal(str(exc), plan_hash=plan.plan_hash))
            raise
        except CouldNotRecord:  # this operation writes nothing more: settled interrupted once the database is back
            unrecorded = True
            raise
        except BaseException as exc:
            await asyncio.shield(run.log.interrupted(repr(exc), what_is_known=run.watch.timeline()))
            raise
        finally:
            await run.progress.close()
        findings = restart_findings(plan, run.watch, run.probe, poll_interval_s)
        for finding in findings:
            await run.log.check(finding)
            if on_finding:
                await on_finding(finding)
        extra: dict[str, Any] = {"old_pid": plan.before.main_pid, "new_pid": run.watch.new_pid,
                                 "ready_after_s": round(run.watch.ready_s, 3) if run.watch.ready_s is not None
                                 else None, "pid_changes": len(run.watch.new_pids), "plan_hash": plan.plan_hash}
        result = OperationResult(plan.operation_id, Operation.RESTART, plan.host.name, run.started_at,
                                 time.monotonic() - run.started, findings, extra=extra, stats=run.stats)
        await run.log.finished(Finished.of(result, **extra))
    finally:  # a rollout's host goes back to the rollout (commands/restart/rollout.py), which frees it
        try:
            if fleet_operation_id is not None:
                await asyncio.shield(locks.hand_over(audit, lock, fleet_operation_id, Operation.ROLLOUT))
            else:
                await asyncio.shield(locks.release(audit, lock))
        except CouldNotRecord:
            if not unrecorded:
                raise
            # the database is still down: the lock is freed when it is settled, and the error the user must
            # see is the one already raised (what was not recorded, and whether anything was sent)
    return result


def changes_since(before: ServiceSnapshot, now: ServiceSnapshot) -> list[str]:
    """How the running process differs from the planned one (empty: it is the same process)."""
    changed = []
    if now.main_pid != before.main_pid:
        changed.append(f"main PID {before.main_pid} → {now.main_pid}")
    if now.invocation_id != before.invocation_id:
        changed.append(f"InvocationID {before.invocation_id} → {now.invocation_id}")
    if (now.main_pid == before.main_pid and now.started_epoch is not None and before.started_epoch is not None
            and abs(now.started_epoch - before.started_epoch) > START_TOLERANCE_S):
        changed.append(f"PID {now.main_pid} now belongs to a process started {now.started_at}")
    if now.container_id != before.container_id:
        changed.append(f"container {(before.container_id or 'none')[:12]} → {(now.container_id or 'none')[:12]} "
                       "(recreated)")
    if now.container_started != before.container_started:
        again = utc_at(now.container_started) if now.container_started is not None else "an unknown time"
        changed.append(f"the container started again at {again}")
    return changed


class _Run:
    def __init__(self, plan: RestartPlan, origin: Origin, audit: AuditStore, on_progress: OnProgress | None,
                 poll_interval_s: float, settle_s: float) -> None:
        self.plan, self.origin, self.audit = plan, origin, audit
        self.log = audit_log(audit, Operation.RESTART, plan.operation_id, plan.host.name, origin.actor)
        self.service = plan.service
        self.poll_interval_s, self.settle_s = poll_interval_s, settle_s
        self.watch = Watch(self.service, plan.before)
        if is_container(self.service):
            self.watch.runs = ContainerRuns(self.service.min_uptime_s, plan.before.container_started,
                                            plan.before.container_id)
        self.manager = checks_for(self.service)
        self.main_pid = self.manager.main_pid(self.service)
        self.progress = ProgressSink(on_progress)
        self.probe: Finding | None = None
        self.started_at, self.started = utc_now(), time.monotonic()
        self.sent_at: float | None = None
        self.stats = {"connections": 0, "exec_round_trips": 0, "polls": 0}
        self.checked: ServiceSnapshot | None = None
        self.halt: Halt | None = None
        self.last_state: CommandResult | None = None  # the last poll's state step (a container's address)


    def elapsed(self) -> float:
        return time.monotonic() - self.sent_at if self.sent_at is not None else 0.0

    def report(self, phase: Phase, *, force: bool = False) -> None:
        self.progress.offer(self.watch.progress(self.plan.host.name, self.plan.operation_id, phase, self.elapsed()),
                            force=force)

    async def execute(self) -> None:
        self.report("before", force=True)
        try:
            async with connect(self.plan.host) as conn:
                self.stats["connections"] += 1
                try:
                    await self._recheck(conn)
                    await self._act_and_watch(conn)
                finally:
                    self.stats["exec_round_trips"] = conn.exec_round_trips
        except CouldNotCheck as exc:
            if not self.watch.lost:
                self.watch.link_lost(str(exc), self.elapsed())
            await self.log.step("link-lost", at_s=round(self.elapsed(), 3), problem=str(exc))
        self.report("done", force=True)

    async def _recheck(self, conn: HostConnection) -> None:
        """Approval binds to the plan: the planned process must still be the one running."""
        now = self.checked or (await read_snapshot(conn, self.service))[0]
        if changed := changes_since(self.plan.before, now):
            raise PlanVoid(f"plan void, nothing restarted: {self.plan.host.name} changed since the plan: "
                                  + "; ".join(changed), hint="request a new plan")
        if self.watch.runs is not None:  # a new run must have started after this moment, by the host's clock
            self.watch.runs.requested_at = now.host_clock
        await self.log.step("before", state=asdict(now))

    async def _act_and_watch(self, conn: HostConnection) -> None:
        argv = restart_argv(self.service)
        watch = self.watch
        if self.halt is not None and (why := self.halt()):
            raise NotSent(f"not restarted: {why}; nothing was sent to {self.plan.host.name}",
                          hint="its service runs as before")
        # Recorded first, then sent: a write the database does not take leaves nothing sent (and says so),
        # never a restart the log cannot tell.
        try:
            await self.log.step(RESTART_SENT, command=shlex.join(argv))
        except CouldNotRecord as exc:
            raise not_recorded(self.plan.host.name, exc) from exc
        watch.command, watch.command_state = shlex.join(argv), CommandState.RUNNING
        self.sent_at = time.monotonic()
        command = asyncio.create_task(_run_act(conn, argv, self.service.manager in ACTS,
                                               self.service.ready_timeout_s + COMMAND_GRACE_S))
        self.report("restarting", force=True)
        try:
            await self._wait_ready(conn, command)
            if watch.ready_s is not None and not watch.lost:
                await self._probe_and_settle(conn)
        finally:
            if not command.done():
                command.cancel()
            await asyncio.gather(command, return_exceptions=True)

    def _command_finished(self, command: asyncio.Task[CommandResult]) -> bool:
        """Fold a finished restart command into the watch; True when this call did so."""
        if not command.done() or self.watch.command_state != CommandState.RUNNING:
            return False
        at = self.elapsed()
        exc = command.exception() if not command.cancelled() else None
        if exc is None and not command.cancelled():
            self.watch.command_done(command.result(), at)
        elif isinstance(exc, CommandTimedOut):
            self.watch.command_done(None, at, str(exc), state=CommandState.HUNG)
        elif isinstance(exc, CouldNotCheck):
            self.watch.link_lost(str(exc), at)
        else:
            self.watch.command_done(None, at, repr(exc))
        return True

    async def _wait_ready(self, conn: HostConnection, command: asyncio.Task[CommandResult]) -> None:
        watch = self.watch
        assert self.sent_at is not None
        deadline = self.sent_at + self.service.ready_timeout_s
        polls_after_return = 0
        repolled = False
        while True:
            if self._command_finished(command):
                result = watch.command_result
                await self.log.step("restart-returned", at_s=round(self.elapsed(), 3),
                                    exit_status=result.exit_status if result else None, state=watch.command_state)
            if watch.lost:
                return
            returned = watch.command_state != CommandState.RUNNING
            poll_started = time.monotonic()
            await self._poll(conn, deadline)
            polls_after_return += 1 if returned else 0
            self.report("waiting")
            if watch.ready_s is not None:
                await self.log.step("ready", ready_after_s=round(watch.ready_s, 3), new_pid=watch.new_pid)
                return
            if watch.command_state in (CommandState.FAIL, CommandState.LOST) and polls_after_return >= 1:
                return  # the manager said no (or nothing): one look at the state after it is the evidence
            if watch.wrong_flags_final():
                return
            if (since := watch.crash_loop_since()) is not None and self.elapsed() >= since + self.settle_s:
                return  # the exit codes of a few more runs, then the loop is named
            if (gone := watch.gone_since()) is not None and self.elapsed() >= gone + self.settle_s:
                return  # a container ended and its engine does not restart it: it will not come back
            if time.monotonic() >= deadline:
                if watch.command_state == CommandState.RUNNING:
                    watch.command_done(None, self.elapsed(), "still running at the deadline", state=CommandState.HUNG)
                return
            soon = poll_started + self.poll_interval_s
            if (due := watch.uptime_due()) is not None:
                # the poll that proves min_uptime_s must read the host's clock after it: its read (about half a
                # poll after it starts, as the last one's was) is timed to land just after, not up to a poll late
                soon = max(soon, time.monotonic() + due - (time.monotonic() - poll_started) + UPTIME_MARGIN_S)
            if watch.cmdline_wanted() is not None and not repolled:
                repolled = True
                continue  # a new PID just appeared: read its cmdline at once
            repolled = False
            await self._pause(command, min(soon, deadline))

    async def _pause(self, command: asyncio.Task[CommandResult], until: float) -> None:
        """Sleep until the next poll is due, waking early when the restart command returns."""
        delay = max(0.0, until - time.monotonic())
        if command.done() and self.watch.command_state == CommandState.RUNNING:
            return  # it returned during the last poll: fold it in and look again at once
        if command.done():
            await asyncio.sleep(delay)
        else:
            await asyncio.wait({command}, timeout=delay)

    async def _poll(self, conn: HostConnection, deadline: float) -> None:
        """One poll: state (and a new PID's cmdline) in one exec round trip, health meanwhile."""
        pid = self.watch.cmdline_wanted()
        # the PID is the one a poll already saw: its cmdline is read by that number, not the script's
        reads = [self.main_pid] + ([Reads(CMDLINE, (cmdline_argv(pid),))] if pid is not None else [])
        remaining = max(0.5, deadline - time.monotonic())
        health = asyncio.create_task(fetch_via_host(conn, self._health_url(),
                                                    timeout_s=min(POLL_HEALTH_TIMEOUT_S, remaining)))
        try:
            read = await read_facts(conn, reads)
        except BaseException:
            health.cancel()
            await asyncio.gather(health, return_exceptions=True)
            raise
        outcome = await health
        self.stats["polls"] += 1
        (state_result,) = read[self.main_pid.name]
        self.last_state = state_result
        self.watch.observe(Poll(self.elapsed(), state_result, self.main_pid.state(state_result), outcome, pid,
                                read[CMDLINE][0] if pid is not None else None, look_of(self.service, state_result)))

    def _health_url(self) -> str:
        """``health_url``, or (a container on a bridge network) the same URL at the container's address as the
        last inspect showed it (``DockerHealthCheck``)."""
        check = self.manager.health(self.service.health_url)
        if self.last_state is None or not check.needs:
            return self.service.health_url
        request = check.request_from(Read((), {name: (self.last_state,) for name in check.needs}))
        return request.url if isinstance(request, HttpRequest) else self.service.health_url

    async def _probe_and_settle(self, conn: HostConnection) -> None:
        """Send the real request once everything is green; keep watching the PID meanwhile and for settle_s."""
        watch = self.watch
        assert watch.ready_s is not None
        probe = self.service.probe
        task = asyncio.create_task(ask(conn, self.manager.probe(probe))) if probe else None
        if task is not None:
            watch.probe_state = Signal.PENDING
            await self.log.step("probe-sent", url=probe.url if probe else None)
        # a container's min_uptime_s, already held before it was green, is its settle: no second window
        settle_until = watch.ready_s + (0.0 if watch.runs is not None else self.settle_s)
        try:
            while True:
                if task is not None and task.done() and self.probe is None:
                    self.probe = task.result()
                    watch.probe_state = Signal.OK if self.probe.status == CheckStatus.PASS else Signal.FAIL
                    await self.log.step("probe-answered", status=self.probe.status)
                phase: Phase = "probing" if task is not None and self.probe is None else "settling"
                self.report(phase)
                if self.elapsed() >= settle_until and (task is None or task.done()):
                    # a loop, or the green process seen dead (its next start may be under way): settle_s from then,
                    # so a loaded machine's slow polls cannot end the watch between one run and the next
                    since = watch.crash_loop_since()
                    since = watch.died_since() if since is None else since
                    if since is None or self.elapsed() >= since + self.settle_s:
                        return
                started = time.monotonic()
                await self._poll(conn, time.monotonic() + POLL_HEALTH_TIMEOUT_S)
                delay = max(0.0, started + self.poll_interval_s - time.monotonic())
                if task is not None and not task.done():
                    await asyncio.wait({task}, timeout=delay)
                else:
                    await asyncio.sleep(delay)
        finally:
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


async def _run_act(conn: HostConnection, argv: list[str], engine: bool, timeout_s: float) -> CommandResult:
    """The restart command; a container engine's CLI only if root alone can change it (engine_guard), its
    result naming the engine's own command."""
    if not engine:
        return await conn.run(argv, timeout_s=timeout_s)
    result = await conn.run(guarded(argv), timeout_s=timeout_s)
    return replace(result, command=shlex.join(argv))
