"""Pure plain-text rendering of a restart: the plan and the one-line live status.

Used by the CLI (stdout / the live line on stderr); the Slack front-end can use the same
words in its plan message and in the progress it puts on the parent message.
"""

from __future__ import annotations

from commands.restart_plan import RestartPlan
from commands.restart_watch import RestartProgress

OK, BAD, WAIT, UNKNOWN = "✓", "✗", "…", "?"


def plan_text(plan: RestartPlan) -> str:
    service, before = plan.service, plan.before
    running = (f"PID {before.main_pid}, {before.state}, started {before.started_at or 'at an unknown time'}"
               if before.main_pid else f"no main PID ({before.state})")
    if service.manager == "systemd":
        running += (f"\n               InvocationID {before.invocation_id or '-'}, NRestarts {before.n_restarts}, "
                    f"ExecMainStartTimestampMonotonic {before.exec_main_start_monotonic_us}")
    flags = [f"expect {flag!r}" for flag in service.expect_flags]
    flags += [f"forbid {flag!r}" for flag in service.forbid_flags]
    proof = ["a NEW main PID" + (" and InvocationID" if service.manager == "systemd" else ""),
             f"{service.unit} active", f"health 200 from {service.health_url} (seen from the host)"]
    proof.append("cmdline: " + ("; ".join(flags) if flags else "no flags to check"))
    if service.probe:
        expect = f", reply containing {service.probe.expect!r}" if service.probe.expect is not None else ""
        proof.append(f"then one real request: POST {service.probe.url} within {service.probe.timeout_s:g} s{expect}")
    suspicious = (f"; ready sooner than {service.min_startup_s:g} s is suspicious" if service.min_startup_s else "")
    lines = [
        f"Restart plan for {plan.host.name} (operation {plan.operation_id}, plan {plan.plan_hash[:12]})",
        f"  service    {service.unit} ({service.manager}) on {plan.host.address}",
        f"  running    {running}",
        f"  cmdline    {before.cmdline or '(unreadable)'}",
        f"  will run   {plan.restart_command}",
        "  then prove " + "\n             ".join(proof),
        f"  deadline   {service.ready_timeout_s:g} s{suspicious}",
    ]
    return "\n".join(lines)


def progress_line(progress: RestartProgress) -> str:
    """e.g. ``12.3 s · restart exit 0 ✓ · PID 300698 → 302221 ✓ · health 503… · cmdline pending``."""
    parts = [f"{progress.elapsed_s:5.1f} s", _command(progress), _pid(progress), _health(progress), _cmdline(progress)]
    if progress.probe_state != "n/a":
        parts.append("probe " + {"ok": OK, "fail": BAD, "error": UNKNOWN}.get(progress.probe_state, "pending"))
    if progress.ready_after_s is not None:
        parts.append(f"ready after {progress.ready_after_s:.2f} s")
    return " · ".join(parts)


def _command(progress: RestartProgress) -> str:
    state = progress.command_state
    if state == "ok":
        return f"restart exit 0 {OK}"
    if state == "fail":
        return f"restart exit {progress.command_exit_status} {BAD}"
    if state == "lost":
        return f"restart: no exit status {UNKNOWN}"
    if state == "hung":
        return f"restart still running {BAD}"
    return "restart running" + WAIT if state == "running" else "restart not sent"


def _pid(progress: RestartProgress) -> str:
    old = progress.old_pid if progress.old_pid is not None else "none"
    if progress.pid_changes > 1:
        return f"PID {old} → {progress.current_pid} {BAD} changed {progress.pid_changes} times"
    if progress.pid_changed:
        return f"PID {old} → {progress.current_pid} {OK}"
    if progress.current_pid is None:
        return f"PID {old} → (none, {progress.service_state}){WAIT}"
    return f"PID {old} unchanged{WAIT}"


def _health(progress: RestartProgress) -> str:
    status = progress.health_status if progress.health_status is not None else "—"
    if progress.health_state == "ok":
        return f"health {status} {OK}"
    return f"health {status}{WAIT}"


def _cmdline(progress: RestartProgress) -> str:
    if progress.cmdline_state == "ok":
        return f"cmdline {OK}"
    if progress.cmdline_state == "fail":
        return f"cmdline {BAD} ({progress.cmdline_problem})"
    return "cmdline pending"
