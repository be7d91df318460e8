"""The restart's plain text, shown by both front-ends: the plan a person approves (one host, or a group's
rolling restart) and the live progress line (the CLI prints them; Slack quotes them in a code block or
attaches them as a file), and the marks they and a rollout's lines use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.words import final_text, plural, rollout_proof_words, shorten_middle
from commands.inventory.containers import CONTAINER_MANAGERS

if TYPE_CHECKING:  # types only: rendering must not load the restart code
    from commands.restart.plan import RestartPlan
    from commands.restart.rollout import RolloutPlan
    from commands.restart.watch import RestartProgress

OK, BAD, WAIT, UNKNOWN = "✓", "✗", "…", "?"
ROLLOUT_MARKS = {"done": OK, "failed": BAD, "untouched": "-"}  # a rollout's host states (HostState)
# The restart's own states (commands.restart.watch: CommandState, SignalState), as the progress line says them.
SIGNAL_MARKS = {"ok": OK, "fail": BAD, "error": UNKNOWN}
COMMAND_WORDS = {"ok": "restart exit 0 {ok}", "fail": "restart exit {exit} {bad}",
                 "lost": "restart: no exit status {unknown}", "hung": "restart still running {bad}",
                 "running": "restart running{wait}"}
CMDLINE_WORDS = {"ok": "cmdline {ok}", "fail": "cmdline {bad} ({problem})"}


@final_text
def render_restart_plan(plan: RestartPlan, *, title: bool = True) -> str:
    """The plan a person approves; ``title=False`` leaves out the first line (host and ids) for a
    message that says them once elsewhere (the Slack plan's header and footer)."""
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
    if service.manager in CONTAINER_MANAGERS:  # never RestartCount: it does not count `docker restart` (moby#37596)
        proof[:2] = [f"a new StartedAt later than the request and a new PID > 0; running, not restarting, "
                     f"for {service.min_uptime_s:g} s (min_uptime_s)"]
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
    return "\n".join(lines if title else lines[1:])


@final_text
def progress_line(progress: RestartProgress) -> str:
    """e.g. ``12.3 s · restart exit 0 ✓ · PID 300698 → 302221 ✓ · health 503… · cmdline pending``."""
    parts = [f"{progress.elapsed_s:5.1f} s", _command(progress), _pid(progress), _health(progress), _cmdline(progress)]
    if progress.probe_state != "n/a":
        parts.append("probe " + SIGNAL_MARKS.get(progress.probe_state, "pending"))
    if progress.ready_after_s is not None:
        parts.append(f"ready after {progress.ready_after_s:.2f} s")
    return " · ".join(parts)


def _command(progress: RestartProgress) -> str:
    said = COMMAND_WORDS.get(progress.command_state, "restart not sent")
    return said.format(exit=progress.command_exit_status, ok=OK, bad=BAD, wait=WAIT, unknown=UNKNOWN)


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
    said = CMDLINE_WORDS.get(progress.cmdline_state, "cmdline pending")
    return said.format(ok=OK, bad=BAD, problem=progress.cmdline_problem)


def rollout_host_line(plan: RestartPlan, width: int = 0, cmdline_chars: int = 90) -> str:
    """``ct129  PID 4122  sglang (supervisord)  python3 /srv/app/fake_llm.py --port 30000 …``"""
    before = plan.before
    pid = f"PID {before.main_pid}" if before.main_pid else f"no PID ({before.state})"
    return (f"{plan.host.name.ljust(width)}  {pid:<11} {plan.service.unit} ({plan.service.manager})  "
            f"{shorten_middle(before.cmdline or '(cmdline unreadable)', cmdline_chars)}")


@final_text
def render_rollout_plan(plan: RolloutPlan) -> str:
    """The one plan a person approves for a whole group: every host's PID and cmdline, shortened."""
    lines = [f"Rolling restart plan for {plan.target}: {plural(len(plan.hosts), 'host')}, "
             f"{plan.restart_batch} at a time (operation {plan.operation_id}, plan {plan.plan_hash[:12]})",
             f"  each host is restarted, then must prove {rollout_proof_words(plan)}",
             "  before the next batch starts; the first host not proven halts the rollout (its batch finishes,",
             "  later hosts are not touched)"]
    width = max((len(p.host.name) for p in plan.hosts), default=0)
    for number, batch in enumerate(plan.batches(), 1):
        for host_plan in batch:
            lines.append(f"  {number:>3}. {rollout_host_line(host_plan, width)}")
    return "\n".join(lines)
