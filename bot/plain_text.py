"""Plain-text rendering for terminals (the CLI, the demo): results, plans, live restart status, the audit trail."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

from bot.typed_command import GIVEN, command_line
from commands.findings import Finding, NextStep
from commands.fleet.names import compress_names
from commands.operation import OperationResult
from commands.redact import redact
from commands.registry import OPERATIONS
from commands.store.trail import IN_PROGRESS

if TYPE_CHECKING:  # types only: rendering a verify must not load the restart, restore and chain code
    from commands.restart.plan import RestartPlan
    from commands.restart.rollout import HostOutcome, RolloutPlan, RolloutResult
    from commands.restart.watch import RestartProgress
    from commands.restore.plan import RestorePlan
    from commands.store.chain import ChainReport
    from commands.store.trail import OperationRecord

MARKS = {"pass": "✓ pass ", "fail": "✗ FAIL ", "warn": "! warn ", "error": "? error", "skipped": "» skip "}
VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "error": "COULD NOT CHECK", IN_PROGRESS: "IN PROGRESS"}


P = ParamSpec("P")


def final_text(render: Callable[P, str]) -> Callable[P, str]:
    """The last gate before a terminal or Slack: whatever a renderer quotes (a URL from the
    inventory, a plan field) leaves masked, even if a caller forgot to redact it."""
    @wraps(render)
    def redacted(*args: P.args, **kwargs: P.kwargs) -> str:
        return redact(render(*args, **kwargs))
    return redacted


@final_text
def render_result(result: OperationResult, *, verbose: bool = False) -> str:
    lines = [
        f"proofbot {result.operation} {result.host}: {VERDICT_WORDS[result.verdict]} "
        f"({len(result.checks)} checks in {result.duration_s:.2f} s, operation {result.operation_id})",
    ]
    lines += finding_lines(result.checks, verbose=verbose)
    counts = {status: sum(1 for f in result.checks if f.status == status) for status in MARKS}
    lines.append("  " + " · ".join(f"{n} {status}" for status, n in counts.items() if n))
    return "\n".join(lines)


def finding_lines(findings: Sequence[Finding], *, verbose: bool, evidence: bool = True) -> list[str]:
    """One line per finding with its next step; the evidence of those not passing (all with ``verbose``)."""
    lines: list[str] = []
    width = max((len(finding.name) for finding in findings), default=0)
    for finding in findings:
        lines.append(f"  {MARKS[finding.status]}  {finding.name.ljust(width)}  {finding.summary}")
        if finding.next_step:
            lines.append(f"  {' ' * (len(MARKS['pass']) + 2 + width)}  → {next_step_words(finding.next_step)}")
        if evidence and (verbose or finding.status != "pass"):
            lines.extend(evidence_lines(finding))
    return lines


def next_step_words(step: NextStep) -> str:
    """The next step as a terminal user types it: ``proofbot restore ct129 pre-ddtree --move-extras``."""
    return f"{step.advice} {command_line(step.operation, *step.args, *step.cli_flags)}"


def evidence_lines(finding: Finding) -> list[str]:
    if finding.evidence is None:
        return []
    pad = "           "
    lines = [f"{pad}$ {line}" for line in finding.evidence.command.splitlines()]
    exit_note = "no exit status" if finding.evidence.exit_status is None else f"exit {finding.evidence.exit_status}"
    output = finding.evidence.output.rstrip("\n").splitlines()
    shown = output[:12] + ([f"… {len(output) - 12} more lines (use --json for all)"] if len(output) > 12 else [])
    lines += [f"{pad}  {line}" for line in shown]
    lines.append(f"{pad}  ({exit_note}, {finding.evidence.duration_s:.3f} s)")
    return lines


@final_text
def render_restore_plan(plan: RestorePlan, *, diff_lines: int = 40) -> str:
    """The plan a person approves: what differs, hashes, sizes, modes, a short diff, extra files."""
    lines = [f"Restore plan for {plan.host.name} from {plan.source.label} "
             f"(operation {plan.operation_id}, plan {plan.plan_hash[:12]})"]
    for f in plan.files:
        if f.state == "same":
            lines.append(f"  = {f.name}: identical ({(f.live_sha or '')[:12]}), nothing to do")
        elif f.state == "missing":
            lines.append(f"  + {f.name}: missing at {f.live_path}; will be written from {f.source_path}")
        elif f.state == "unreadable":
            lines.append(f"  ? {f.name}: cannot plan: {f.problem}")
        else:
            lines.append(f"  ~ {f.name}: live {(f.live_sha or '')[:12]} ({f.live_size} B, mode {f.live_mode} "
                         f"{f.live_owner}) → {(f.source_sha or '')[:12]} ({f.source_size} B) at {f.live_path}"
                         + (f" (symlink → {f.live_target}: the target is written, the link kept)"
                            if f.live_target else ""))
            diff = f.diff.splitlines()
            lines += [f"      {line}" for line in diff[:diff_lines]]
            if len(diff) > diff_lines:
                lines.append(f"      … {len(diff) - diff_lines} more diff lines")
    if plan.extras:
        lines.append("  extra files in watch dirs (moved into the snapshot only with --move-extras): "
                     + ", ".join(plan.extras))
    return "\n".join(lines)



OK, BAD, WAIT, UNKNOWN = "✓", "✗", "…", "?"


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



PROBLEM_WORDS = {"edited": "content edited", "deleted": "row deleted", "inserted": "row inserted",
                 "genesis": "genesis wrong", "truncated": "tail truncated", "anchor": "anchor not found"}


def no_thread(via: str | None) -> str:
    """Where an operation with no Slack thread came from (the CLI, the demo)."""
    return f"(from the {via if via and via != 'cli' else 'CLI'}, no thread)"


def verdict_word(verdict: str) -> str:
    return VERDICT_WORDS.get(verdict, verdict.upper())


def approval_words(record: OperationRecord, *, actor: str | None) -> str:
    """'approved by X', 'rejected by X', 'approval expired', or why there is none."""
    if record.decision == "approved":
        return f"approved by {actor}"
    if record.decision == "rejected":
        return f"rejected by {actor}"
    if record.decision == "expired":
        return "approval expired"
    mutating = any(spec.name == record.operation and spec.mutating for spec in OPERATIONS)
    return "no approval recorded" if mutating else "no approval needed"


def when(at: str | None) -> str:
    """'2026-05-22T10:00:00.123Z' as '2026-05-22 10:00:00Z'."""
    if not at:
        return "-"
    return at.replace("T", " ").split(".")[0].rstrip("Z") + "Z"


FLEET_COUNT_WORDS = (("pass", "pass"), ("warn", "warn"), ("fail", "fail"), ("error", "could not check"))


def fleet_counts_words(counts: Mapping[str, int]) -> str:
    """``15 pass · 5 fail · 1 could not check``: verify's outcomes in this order, then any other
    operation's own (a rolling restart's ``2 done · 1 failed · 1 untouched``) as recorded."""
    known = dict(FLEET_COUNT_WORDS)
    words = [f"{counts[key]} {text}" for key, text in FLEET_COUNT_WORDS if counts.get(key)]
    return " · ".join(words + [f"{n} {key}" for key, n in counts.items() if key not in known and n])


def operation_words(record: OperationRecord) -> str:
    """What ran, on what: ``verify ct129``, or a fleet's ``verify gpu-west (21 hosts)``."""
    if record.fleet:
        count = record.fleet.hosts
        return f"{record.operation or '?'} {record.fleet.target} ({count} host{'s' if count != 1 else ''})"
    return f"{record.operation or '?'} {record.host or '?'}"


def fleet_words(record: OperationRecord) -> str:
    """A fleet's counts (`` · 15 pass · 5 fail``), or the fleet a host's part belonged to; else ''."""
    if record.fleet and record.fleet.counts:
        return " · " + fleet_counts_words(record.fleet.counts)
    if record.part_of:
        part = record.part_of
        return f" · part of {record.operation or '?'} {part.target} ({part.operation_id})"
    return ""


@final_text
def render_operations(records: Sequence[OperationRecord], host: str | None) -> str:
    scope = f"for {host}" if host else "across hosts"
    if not records:
        return f"Audit trail {scope}: no operations recorded yet"
    plural = "operation" if len(records) == 1 else "operations"
    lines = [f"Audit trail {scope}: last {len(records)} {plural}, newest first"]
    for record in records:
        lines.append("")
        lines.append(f"{when(record.requested_at)}  {operation_words(record)}: "
                     f"{verdict_word(record.verdict)}{fleet_words(record)}   ({record.operation_id})")
        finished = f" · finished {when(record.finished_at)}" if record.finished_at else ""
        lines.append(f"    requested by {record.requested_by or '?'}"
                     f"{f' via {record.via}' if record.via else ''} · "
                     f"{approval_words(record, actor=record.decided_by)}{finished}")
        if record.channel and record.thread_ts:
            lines.append(f"    thread: Slack channel {record.channel}, thread_ts {record.thread_ts}")
        else:
            lines.append(f"    {no_thread(record.via)}")
    return "\n".join(lines)


def render_chain(report: ChainReport, db: Path) -> str:
    lines: list[str] = []
    if report.broken is None and not report.schema_differences:
        lines.append(f"{report.events} events, chain intact ({db})")
        if report.head_id is not None and report.head_hash is not None:
            lines.append(f"head: event #{report.head_id} {report.head_hash}")
            anchor = command_line("audit", "verify", *GIVEN.get(), "--anchor",  # the anchor last: it is what changes
                                  f"{report.head_id}:{report.head_hash[:16]}", given=())
            lines.append(f"  note it elsewhere; later `{anchor}` proves the log still holds it")
    elif report.broken is not None:
        broken = report.broken
        lines.append(f"chain BROKEN at event #{broken.event_id}: {PROBLEM_WORDS[broken.problem]} ({db})")
        lines.append(f"  {broken.detail}")
        lines.append(f"  {report.events} events checked; only the first broken link is reported")
    if report.schema_differences:
        lines.append("BROKEN: schema differs: " + ", ".join(d.short for d in report.schema_differences)
                     + f" ({db}; {report.events} events, links " + ("intact" if report.broken is None else "broken")
                     + "; compared with what proofbot's migrations create)")
        lines.extend(f"  {d.short}: {shorten(d.sql, 300)}" for d in report.schema_differences if d.sql)
    if report.missing_guards:
        lines.append("append-only triggers missing (dropped by hand?): " + ", ".join(report.missing_guards))
    return "\n".join(lines)


# -- rolling restart (README "Rolling restart") --------------------------------------------

ROLLOUT_WORDS = {"pass": "PASS", "fail": "FAIL", "error": "COULD NOT CHECK", "refused": "HALTED, NOT ALL RESTARTED"}
ROLLOUT_MARKS = {"done": OK, "failed": BAD, "untouched": "-"}


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shorten_middle(text: str, limit: int) -> str:
    """A command line's program and its last flags (where launch options differ), the middle cut."""
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + "…" + text[len(text) - (limit - head - 1):]


def rollout_host_line(plan: RestartPlan, width: int = 0, cmdline_chars: int = 90) -> str:
    """``ct129  PID 4122  sglang (supervisord)  python3 /srv/app/fake_llm.py --port 30000 …``"""
    before = plan.before
    pid = f"PID {before.main_pid}" if before.main_pid else f"no PID ({before.state})"
    return (f"{plan.host.name.ljust(width)}  {pid:<11} {plan.service.unit} ({plan.service.manager})  "
            f"{shorten_middle(before.cmdline or '(cmdline unreadable)', cmdline_chars)}")


def rollout_proof_words(plan: RolloutPlan) -> str:
    """What each host must prove before the next batch starts (from its first host's service)."""
    first = plan.hosts[0].service if plan.hosts else None
    probe = ", one real request" if first is not None and first.probe else ""
    return f"a NEW main PID, the unit active, health 200, the cmdline flags{probe}"


@final_text
def render_rollout_plan(plan: RolloutPlan) -> str:
    """The one plan a person approves for a whole group: every host's PID and cmdline, shortened."""
    count = len(plan.hosts)
    lines = [f"Rolling restart plan for {plan.target}: {count} host{'s' if count != 1 else ''}, "
             f"{plan.restart_batch} at a time (operation {plan.operation_id}, plan {plan.plan_hash[:12]})",
             f"  each host is restarted, then must prove {rollout_proof_words(plan)}",
             "  before the next batch starts; the first host not proven halts the rollout (its batch finishes,",
             "  later hosts are not touched)"]
    width = max((len(p.host.name) for p in plan.hosts), default=0)
    for number, batch in enumerate(plan.batches(), 1):
        for host_plan in batch:
            lines.append(f"  {number:>3}. {rollout_host_line(host_plan, width)}")
    return "\n".join(lines)


@final_text
def rollout_host_done_line(outcome: HostOutcome) -> str:
    result = outcome.result
    if result is None:
        return f"  - {outcome.host} not restarted: {outcome.reason}"
    old, new = result.extra.get("old_pid"), result.extra.get("new_pid")
    if outcome.state == "done":
        ready = result.extra.get("ready_after_s")
        return (f"  {OK} {outcome.host} restarted and proven: PID {old} → {new}"
                + (f", ready {ready:.2f} s" if ready is not None else ""))
    return f"  {BAD} {outcome.host} {VERDICT_WORDS[result.verdict]}: {outcome.reason or 'not proven'}"


@final_text
def render_rollout_result(result: RolloutResult, *, verbose: bool = False) -> str:
    lines = [f"proofbot restart {result.target}: {ROLLOUT_WORDS[result.verdict]} "
             f"({len(result.hosts)} hosts in {result.duration_s:.1f} s, operation {result.operation_id})"]
    if result.halted:
        lines.append(f"  {result.halted}")
    for state in ("done", "failed", "untouched"):
        names = result.named(state)
        lines.append(f"  {state + ' (' + str(len(names)) + '):':<16}{compress_names(names) or '-'}")
    for outcome in result.hosts:
        if outcome.result is not None and (verbose or outcome.state == "failed"):
            lines.append("")
            lines.append(render_result(outcome.result, verbose=verbose))
    return "\n".join(lines)


def render_ssh_values(values: Mapping[str, Mapping[str, Any]]) -> str:
    """``proofbot ping -v``: one line per SSH value, with where it came from."""
    width = max(len(key) for key in values)
    lines = []
    for key, entry in values.items():
        value = entry["value"]
        shown = ", ".join(str(item) for item in value) if isinstance(value, list) else \
            "none" if value is None else str(value)
        lines.append(f"      {key.ljust(width)}  {shown or 'none'}  ← {entry['origin']}")
    return "\n".join(lines)


def runs_old_code(result: OperationResult) -> bool:
    """The service is older than files it runs: Slack's thread offers "Restart now", the CLI says restart."""
    return any(f.name == "stale-process" and f.status == "warn" for f in result.checks)


def strict_reason(result: OperationResult) -> str | None:
    """Why ``--strict`` turns this result into exit 1 (a pass with warnings), or None when it does not."""
    warned = [f.name for f in result.checks if f.status == "warn"]
    if result.verdict != "pass" or not warned:
        return None
    return (f"--strict: exit 1: the verdict is PASS, but {len(warned)} check{'s' if len(warned) > 1 else ''} "
            f"warned ({', '.join(warned)})")


def restore_hints(result: OperationResult, *, restart: Sequence[str], undo: Sequence[str] | None,
                  again: Sequence[str]) -> list[str]:
    """What a restore left to do, each with the commands as typed (``restart``, ``undo`` and ``again``
    are the argv of ``proofbot restart HOST``, the undo of this restore, and the restore itself)."""
    hints: list[str] = []
    extras = next((f for f in result.checks if f.name == "extra-files" and f.status == "warn"), None)
    if extras is not None and undo is not None:
        # the files now match the backup, so the same restore has nothing to apply (and moves nothing)
        hints.append(f"hint: {extras.summary.split(' (', 1)[0]}; to move them aside too, undo and restore again "
                     f"with --move-extras: {shlex.join(undo)} && {shlex.join([*again, '--move-extras'])}")
    if runs_old_code(result):
        hints.append("hint: the service still runs the code it started with, not the restored files: restart it: "
                     + shlex.join(restart))
    return hints

