"""Restart of a container, the ``main-pid`` verdict: a new run (StartedAt later than the request, a PID > 0)
up and not restarting for ``min_uptime_s``, or what was seen instead, named: a crash loop with the exit codes
seen, a run that ended and never came back, a StartedAt that never changed. Never from ``RestartCount``."""

from __future__ import annotations

from typing import Any

from commands.clock import utc_at
from commands.findings import Evidence, Finding
from commands.restart.plan import RestartPlan
from commands.restart.runs import ContainerRuns
from commands.restart.watch import Poll, Watch
from commands.vocabulary import CheckStatus


def look_words(poll: Poll) -> str:
    """One poll of a container, for the evidence: status, StartedAt, the container's and the service's PID."""
    look = poll.look
    if look is None:
        return "unreadable"
    started = utc_at(look.started_at) if look.started_at is not None else "-"
    return (f"{look.status} Running {str(look.running).lower()} Restarting {str(look.restarting).lower()} "
            f"StartedAt {started} Pid {look.container_pid} service PID {look.pid or '-'} ExitCode {look.exit_code}"
            + (f" id {look.container_id[:12]}" if look.container_id else ""))


def _details(plan: RestartPlan, runs: ContainerRuns) -> dict[str, Any]:
    before = plan.before
    return {"old_pid": before.main_pid, "new_pids": [run.pid for run in runs.runs if run.pid],
            "old_started_at": utc_at(before.container_started) if before.container_started is not None else None,
            "requested_at": utc_at(runs.requested_at) if runs.requested_at is not None else None,
            "runs": [{"started_at": utc_at(run.started_at), "pid": run.pid, "ended": run.down or None,
                      "exit_code": run.exit_code} for run in runs.runs],
            "exit_codes": runs.exit_codes, "container_ids": runs.ids,
            "recreated": list(runs.recreated) if runs.recreated else None}


def container_pid_finding(plan: RestartPlan, watch: Watch, evidence: Evidence | None) -> Finding:
    """``evidence``: every change the polls saw (``look_words`` of each)."""
    runs = watch.runs
    assert runs is not None
    name, before, last = plan.service.unit, plan.before, watch.last
    details = _details(plan, runs)
    recreated = f"; {runs.recreate_words()}" if runs.recreated else ""
    if last is None:
        return Finding("main-pid", CheckStatus.ERROR, f"never polled: {watch.lost or 'no state read'}", evidence,
                       details)
    old = (f"StartedAt {utc_at(before.container_started) if before.container_started is not None else 'none'}, "
           f"PID {before.main_pid or 'none'}")
    if runs.crash_loop:
        return Finding("main-pid", CheckStatus.FAIL, f"{name} is in a {runs.loop_words()}: not restarted, it "
                       f"does not stay up (runs: {runs.chain()}){recreated}", evidence, details)
    if (gone := watch.gone_since()) is not None:
        run = runs.runs[-1]
        return Finding("main-pid", CheckStatus.FAIL, f"{name} started again at {utc_at(run.started_at)} and was "
                       f"seen {run.down} at +{gone:.1f} s; its engine does not restart it: it never came back"
                       f"{recreated}", evidence, details)
    stable = next((poll for poll in (watch.ready_poll, last) if poll is not None and runs.stable(poll.look)), None)
    if stable is not None and stable.look is not None and stable.look.started_at is not None:
        look, started = stable.look, stable.look.started_at
        reused = " (PID number reused by the new run)" if look.pid == before.main_pid else ""
        return Finding("main-pid", CheckStatus.PASS,
                       f"new run: {old} → StartedAt {utc_at(started)}, PID {look.pid}{reused}; up "
                       f"{look.uptime_s or 0:.1f} s (min_uptime_s {runs.min_uptime_s:g}), Running and not Restarting "
                       f"in every poll of it{recreated}", evidence, details)
    if watch.lost:
        return Finding("main-pid", CheckStatus.ERROR, f"the link dropped at +{watch.lost_s or last.at_s:.1f} s "
                       f"(runs seen: {runs.chain()}): whether the restart took effect is unknown{recreated}",
                       evidence, details)
    if runs.runs:
        run = runs.runs[-1]
        end = last.look
        uptime = f"up {end.uptime_s:.1f} s" if end is not None and end.up and end.uptime_s is not None \
            else f"{end.status if end else 'unreadable'}"
        return Finding("main-pid", CheckStatus.FAIL, f"a new run started at {utc_at(run.started_at)} but was not "
                       f"up {runs.min_uptime_s:g} s (min_uptime_s) by +{last.at_s:.1f} s: {uptime} at the end"
                       f"{recreated}", evidence, details)
    why = (f"`{watch.command}` exited {watch.command_result.exit_status}" if watch.command_result is not None
           and watch.command_result.exit_status != 0 else f"`{watch.command}` {watch.command_state}")
    return Finding("main-pid", CheckStatus.FAIL, f"no run started after the request within {last.at_s:.1f} s "
                   f"({why}; still {old}, {last.look.status if last.look else 'unreadable'}): the restart never "
                   f"took effect{recreated}", evidence, details)
