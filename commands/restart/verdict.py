"""Restart, the verdict: one finding per signal from a finished watch, each saying plainly what it saw.

The suspicious results are findings, not footnotes: a PID that never changed ("the restart
never took effect"), a PID that changed more than once (a crash loop, with the count), health
200 with a forbidden flag ("the old launch script is still in place"), and a readiness
sooner than ``min_startup_s`` ("too fast for a real restart of this service"): a ``fail``
when nothing but health vouches for the new process, a ``warn`` when a real request
(the probe) passed, because that proves the process serves.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from commands.checks.cmdline import cmdline_finding
from commands.checks.service import main_pid_check, service_state_argv
from commands.findings import Evidence, Finding
from commands.restart.container_verdict import container_pid_finding, look_words
from commands.restart.plan import RestartPlan
from commands.restart.watch import Poll, Watch
from commands.vocabulary import CheckStatus, CommandState, Signal

RELOAD_HINTS = ("daemon-reload", "changed on disk")


Judge = Callable[[RestartPlan, Watch, "Finding | None", float], Finding]

# Every signal a restart is judged on, by name, in the order the findings come: the request's list of checks
# and the findings are both read from here.
SIGNALS: tuple[tuple[str, Judge], ...] = (
    ("restart-command", lambda plan, watch, probe, every: command_finding(watch)),
    ("main-pid", lambda plan, watch, probe, every: pid_finding(plan, watch, every)),
    ("health", lambda plan, watch, probe, every: health_finding(plan, watch)),
    ("cmdline", lambda plan, watch, probe, every: cmdline_signal(plan, watch)),
    ("probe", lambda plan, watch, probe, every: probe_signal(watch, probe)),
    ("ready-time", lambda plan, watch, probe, every: ready_finding(plan, watch, probe, every)),
)


def _judged(plan: RestartPlan) -> list[tuple[str, Judge]]:
    return [(name, judge) for name, judge in SIGNALS if name != "probe" or plan.service.probe]


def check_names(plan: RestartPlan) -> list[str]:
    return [name for name, _ in _judged(plan)]


def restart_findings(plan: RestartPlan, watch: Watch, probe: Finding | None, poll_interval_s: float) -> list[Finding]:
    return [judge(plan, watch, probe, poll_interval_s) for _, judge in _judged(plan)]


def _reload_hint(watch: Watch) -> str:
    output = watch.command_result.text if watch.command_result else ""
    if any(hint in output for hint in RELOAD_HINTS):
        return "; the manager says the unit changed on disk and was not reloaded (systemctl daemon-reload)"
    return ""


def command_finding(watch: Watch) -> Finding:
    result, at = watch.command_result, watch.command_returned_s or 0.0
    if watch.command_state == CommandState.NOT_SENT:
        return Finding("restart-command", CheckStatus.ERROR, f"not sent: {watch.lost or 'the restart never started'}")
    if watch.command_state == CommandState.HUNG:
        evidence = Evidence.of(watch.command, None, "(still running, no exit status yet)", at)
        return Finding("restart-command", CheckStatus.FAIL,
                       f"`{watch.command}` still running after {at:.1f} s, no exit status: the restart job is stuck",
                       evidence)
    if result is None:
        evidence = Evidence.of(watch.command, None, watch.command_problem, at)
        return Finding("restart-command", CheckStatus.ERROR,
                       f"no exit status: the link dropped after `{watch.command}` was sent; "
                       "whether it ran is unknown", evidence)
    evidence = Evidence.of(result.command, result.exit_status, result.text, result.duration_s)
    first_line = next((line.strip() for line in result.text.splitlines() if line.strip()), "no output")
    if result.exit_status != 0:
        return Finding("restart-command", CheckStatus.FAIL,
                       f"`{result.command}` exited {result.exit_status}: {first_line}",
                       evidence, {"exit_status": result.exit_status})
    hint = _reload_hint(watch)
    return Finding("restart-command", CheckStatus.WARN if hint else CheckStatus.PASS,
                   f"exited 0 after {result.duration_s:.2f} s{hint}", evidence, {"exit_status": 0})


def _pid_evidence(plan: RestartPlan, watch: Watch, poll_interval_s: float,
                  describe: Callable[[Poll], str] | None = None) -> Evidence | None:
    """Every change of the manager's state the polls saw (``describe``: one poll's words), then its last output."""
    last = watch.last
    if last is None:
        return None
    lines, previous = [], ""
    main_pid = main_pid_check(plan.service)
    for poll in watch.polls:
        if describe is not None:
            state = describe(poll)
        else:
            state = f"{poll.state.state} pid {poll.state.main_pid or '-'}" if poll.state else "unreadable"
        if describe is None and poll.state and (restarts := main_pid.restart_count(poll.state)) is not None:
            state += f" InvocationID {(main_pid.invocation(poll.state) or '')[:12] or '-'} NRestarts {restarts}"
        if state != previous:
            lines.append(f"+{poll.at_s:7.3f} s  {state}")
            previous = state
    command = shlex.join(service_state_argv(plan.service))
    output = "\n".join(lines) + f"\n# last output ({len(watch.polls)} polls):\n{last.state_result.text}"
    return Evidence.of(f"{command}  # every {poll_interval_s:g} s", last.state_result.exit_status, output,
                       last.at_s)


def pid_finding(plan: RestartPlan, watch: Watch, poll_interval_s: float) -> Finding:
    if watch.runs is not None:
        return container_pid_finding(plan, watch, _pid_evidence(plan, watch, poll_interval_s, look_words))
    old, last = plan.before.main_pid, watch.last
    evidence = _pid_evidence(plan, watch, poll_interval_s)
    details = {"old_pid": old, "new_pids": [pid for pid, _ in watch.new_pids]}
    if last is None:
        return Finding("main-pid", CheckStatus.ERROR,
                       f"never polled: {watch.lost or 'no state read'}", evidence, details)
    chain = " → ".join(str(pid) for pid in [old or "none", *(pid for pid, _ in watch.new_pids)])
    if watch.crash_loop:
        restarts = ""
        if last.state is not None and (count := main_pid_check(plan.service).restart_count(last.state)) is not None:
            restarts = f"; NRestarts {plan.before.n_restarts} → {count}"
        return Finding("main-pid", CheckStatus.FAIL,
                       f"crash loop: the main PID changed {len(watch.new_pids)} times within "
                       f"{watch.new_pids[-1][1]:.1f} s of the restart: {chain}{restarts}", evidence, details)
    new = watch.new_pid
    state = last.state.state if last.state else "unreadable"
    if new is not None:
        tail = " (seen before the link dropped)" if watch.lost else ""
        invocation = ""
        if last.state is not None and (now := main_pid_check(plan.service).invocation(last.state)) is not None:
            invocation = f", InvocationID {(plan.before.invocation_id or '-')[:8]}… → {now[:8]}…"
        reused = " (PID number reused by a new process)" if new == old else ""
        if last.state is not None and last.state.active and watch.pid_of(last) == new:
            return Finding("main-pid", CheckStatus.PASS,
                           f"PID {chain}{reused}{invocation}, {state}{tail}", evidence, details)
        status = CheckStatus.ERROR if watch.lost else CheckStatus.FAIL
        return Finding("main-pid", status, f"PID {chain} seen, but {plan.service.unit} is {state} at the end{tail}",
                       evidence, details)
    at = last.at_s
    if watch.lost:
        return Finding("main-pid", CheckStatus.ERROR,
                       f"PID {old} was still the main PID when the link dropped at +{watch.lost_s or at:.1f} s: "
                       "whether the restart took effect is unknown", evidence, details)
    if old is None:
        return Finding("main-pid", CheckStatus.FAIL,
                       f"no main PID after {at:.1f} s ({state}): the service did not start",
                       evidence, details)
    if watch.command_state == CommandState.FAIL and watch.command_result is not None:
        why = f"`{watch.command}` exited {watch.command_result.exit_status}"
        return Finding("main-pid", CheckStatus.FAIL, f"PID {old} unchanged ({why}): the restart never took effect",
                       evidence, details)
    why = f"`{watch.command}` still running" if watch.command_state == CommandState.HUNG else (
        f"although `{watch.command}` exited 0")
    return Finding("main-pid", CheckStatus.FAIL,
                   f"PID {old} unchanged after {at:.1f} s ({why}): the restart never took effect",
                   evidence, details)


def _reference(watch: Watch) -> Poll | None:
    return watch.ready_poll or watch.last


def health_finding(plan: RestartPlan, watch: Watch) -> Finding:
    poll = _reference(watch)
    if poll is None:
        return Finding("health", CheckStatus.ERROR, f"could not check: {watch.lost or 'never polled'}")
    outcome = poll.health
    history, previous = [], object()
    for each in watch.polls:
        if each.health.status != previous:
            history.append(f"+{each.at_s:7.3f} s  {each.health.status or each.health.problem}")
            previous = each.health.status
    shown = f"HTTP {outcome.status}\n{outcome.body}" if outcome.status is not None else outcome.problem
    evidence = Evidence.of(outcome.request, 0 if outcome.status is not None else None,
                           shown + "\n# health over time:\n" + "\n".join(history), outcome.elapsed_s)
    details = {"http_status": outcome.status}
    if outcome.status == 200 and watch.is_new(poll):
        return Finding("health", CheckStatus.PASS,
                       f"200 from the new process, {poll.at_s:.2f} s after the restart command",
                       evidence, details)
    if watch.lost:
        return Finding("health", CheckStatus.ERROR,
                       f"could not check: the link dropped ({watch.lost})", evidence, details)
    if outcome.status == 200:
        return Finding("health", CheckStatus.WARN,
                       f"200, but from the old process (PID {plan.before.main_pid} unchanged): "
                       "it proves nothing about the restart", evidence, details)
    if outcome.status is None:
        return Finding("health", CheckStatus.FAIL,
                       f"no answer at +{poll.at_s:.1f} s: {outcome.problem}", evidence, details)
    return Finding("health", CheckStatus.FAIL,
                   f"answered {outcome.status}, not 200, at +{poll.at_s:.1f} s", evidence, details)


def cmdline_signal(plan: RestartPlan, watch: Watch) -> Finding:
    poll = _reference(watch)
    new = watch.new_pid
    if poll is None or new is None:
        why = watch.lost or f"PID {plan.before.main_pid} never changed"
        return Finding("cmdline", CheckStatus.ERROR, f"no new process to read a command line from: {why}")
    pid = watch.pid_of(poll) if watch.is_new(poll) else new
    read = watch.cmdlines.get(pid or new)
    if read is None:
        return Finding("cmdline", CheckStatus.ERROR, f"could not read the command line of new PID {pid or new} "
                       f"before {'the link dropped' if watch.lost else 'it went away'}")
    finding = cmdline_finding(plan.service, read.pid, read.result)
    if finding.status == CheckStatus.FAIL and read.forbidden and poll.health.status == 200:
        summary = (f"health answers 200 but {', '.join(read.forbidden)} is present in new PID {read.pid}: "
                   f"the old launch script is still in place{_reload_hint(watch)}")
        return Finding("cmdline", CheckStatus.FAIL, summary, finding.evidence, finding.details)
    if finding.status == CheckStatus.FAIL and read.missing:
        summary = f"new PID {read.pid} was started without {', '.join(read.missing)}" + (
            f" and with {', '.join(read.forbidden)}" if read.forbidden else "") + _reload_hint(watch)
        return Finding("cmdline", CheckStatus.FAIL, summary, finding.evidence, finding.details)
    return finding


def probe_signal(watch: Watch, probe: Finding | None) -> Finding:
    if probe is None:
        if watch.lost:
            return Finding("probe", CheckStatus.ERROR, f"not sent: the link dropped ({watch.lost})")
        return Finding("probe", CheckStatus.ERROR,
                       "not sent: the restart never became ready (health 200 from a new process "
                       "with the right flags), so there was nothing to ask")
    if watch.lost and probe.status == CheckStatus.FAIL and probe.details.get("http_status") is None:
        return Finding("probe", CheckStatus.ERROR, f"could not check: the link dropped during the probe ({watch.lost})",
                       probe.evidence, probe.details)
    return probe


def ready_finding(plan: RestartPlan, watch: Watch, probe: Finding | None, poll_interval_s: float) -> Finding:
    service = plan.service
    evidence = Evidence.of(f"restart timeline: polls every {poll_interval_s:g} s over one SSH connection",
                           None if watch.lost else 0, watch.timeline(), watch.last.at_s if watch.last else 0.0)
    ready = watch.ready_s
    details = {"ready_after_s": ready, "min_startup_s": service.min_startup_s}
    if ready is not None:
        if service.min_startup_s and ready < service.min_startup_s:
            too_fast = (f"came back in {ready:.1f} s: too fast for a real restart of this service "
                        f"(min_startup_s {service.min_startup_s:g} s)")
            if probe is not None and probe.status == CheckStatus.PASS:
                return Finding("ready-time", CheckStatus.WARN, too_fast + "; a real request passed, so the new process "
                               "serves: check that it did the work of a real start", evidence, details)
            why = "and the real request failed" if probe is not None else "and nothing but health vouches for it"
            return Finding("ready-time", CheckStatus.FAIL, f"{too_fast} {why}", evidence, details)
        after = "; it did not stay up: crash loop (see main-pid)" if watch.crash_loop else ""
        return Finding("ready-time", CheckStatus.PASS,
                       f"all signals green {ready:.2f} s after the restart command was sent{after}", evidence, details)
    if watch.command_state == CommandState.NOT_SENT:
        return Finding("ready-time", CheckStatus.ERROR, f"not restarted: {watch.lost or 'the command was never sent'}",
                       evidence, details)
    if watch.lost:
        return Finding("ready-time", CheckStatus.ERROR,
                       f"unknown: the link dropped {watch.lost_s or 0:.1f} s after the "
                       "restart command was sent", evidence, details)
    last = watch.last
    if watch.command_state == CommandState.FAIL and watch.command_result is not None:
        never = f"`{watch.command}` exited {watch.command_result.exit_status}"
    elif watch.runs is not None and watch.runs.crash_loop:
        never = watch.runs.loop_words()
    elif watch.crash_loop:
        never = f"crash loop ({len(watch.new_pids)} new PIDs)"
    elif watch.gone_since() is not None:
        never = "the container ended and its engine does not restart it"
    elif watch.wrong_flags_final():
        never = "the new process runs with the wrong flags"
    else:
        waiting = ", ".join(_pending(plan, watch, last)) if last else "a first poll"
        at = last.at_s if last else 0.0
        return Finding("ready-time", CheckStatus.FAIL,
                       f"not ready after {at:.1f} s (deadline {service.ready_timeout_s:g} s): "
                       f"waiting for {waiting}", evidence, details)
    return Finding("ready-time", CheckStatus.FAIL, f"never ready: {never}", evidence, details)


def _pending(plan: RestartPlan, watch: Watch, poll: Poll) -> list[str]:
    pending = []
    if watch.command_state != CommandState.OK:
        pending.append(f"the restart command ({watch.command_state})")
    if not watch.is_new(poll):
        pending.append(f"a new PID (still {plan.before.main_pid})")
    if poll.state is None or not poll.state.active:
        pending.append(f"{plan.service.unit} active (now {poll.state.state if poll.state else 'unreadable'})")
    if poll.health.status != 200:
        pending.append(f"health 200 (now {poll.health.status or 'no answer'})")
    pid = watch.pid_of(poll)
    read = watch.cmdlines.get(pid) if pid is not None else None
    if read is None or read.state != Signal.OK:
        pending.append("the right cmdline" if read is None else f"the right cmdline ({read.state})")
    if watch.runs is not None and not watch.runs.stable(poll.look):
        pending.append(f"the new run up {watch.runs.min_uptime_s:g} s (min_uptime_s), not restarting")
    return pending
