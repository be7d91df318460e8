"""A result and a restore plan as the terminal prints them: one line per check with its mark, the evidence of
those not passing, the hints after a restore, the reason ``--strict`` exits 1, and ``ping -v``'s SSH values."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.cli.marks import MARKS
from bot.typed_command import command_line
from bot.words import VERDICT_WORDS, final_text, runs_old_code, warned_checks
from commands.findings import Finding, NextStep
from commands.operation import OperationResult
from commands.vocabulary import CheckStatus

if TYPE_CHECKING:  # types only: rendering a verify must not load the restore code
    from commands.restore.plan import RestorePlan


@final_text
def render_result(result: OperationResult, *, verbose: bool = False) -> str:
    lines = [
        f"proofbot {result.operation} {result.host}: {VERDICT_WORDS[result.verdict]} "
        f"({len(result.checks)} checks in {result.duration_s:.2f} s, operation {result.operation_id})",
    ]
    lines += finding_lines(result.checks, verbose=verbose)
    counts = {status: sum(1 for f in result.checks if f.status == status) for status in MARKS}
    lines.append("  " + " · ".join(f"{n} {status}" for status, n in counts.items() if n))  # by check status
    return "\n".join(lines)


def finding_lines(findings: Sequence[Finding], *, verbose: bool, evidence: bool = True) -> list[str]:
    """One line per finding with its next step; the evidence of those not passing (all with ``verbose``)."""
    lines: list[str] = []
    width = max((len(finding.name) for finding in findings), default=0)
    for finding in findings:
        lines.append(f"  {MARKS[finding.status]}  {finding.name.ljust(width)}  {finding.summary}")
        if finding.next_step:
            indent = " " * (len(MARKS[CheckStatus.PASS]) + 2 + width)
            lines.append(f"  {indent}  → {next_step_words(finding.next_step)}")
        if evidence and (verbose or finding.status != CheckStatus.PASS):
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


def strict_reason(result: OperationResult) -> str | None:
    """Why ``--strict`` turns this result into exit 1 (a pass with warnings), or None when it does not."""
    warned = warned_checks(result)
    if not warned:
        return None
    checks = f"{len(warned)} check{'s' if len(warned) != 1 else ''}"
    return f"--strict: exit 1: the verdict is PASS, but {checks} warned ({', '.join(warned)})"


def restore_hints(result: OperationResult, *, restart: Sequence[str], undo: Sequence[str] | None,
                  again: Sequence[str]) -> list[str]:
    """What a restore left to do, each with the commands as typed (``restart``, ``undo`` and ``again``
    are the argv of ``proofbot restart HOST``, the undo of this restore, and the restore itself)."""
    hints: list[str] = []
    extras = next((f for f in result.checks
                   if f.name == "extra-files" and f.status == CheckStatus.WARN), None)
    if extras is not None and undo is not None:
        # the files now match the backup, so the same restore has nothing to apply (and moves nothing)
        hints.append(f"hint: {extras.summary.split(' (', 1)[0]}; to move them aside too, undo and restore again "
                     f"with --move-extras: {shlex.join(undo)} && {shlex.join([*again, '--move-extras'])}")
    if runs_old_code(result):
        hints.append("hint: the service still runs the code it started with, not the restored files: restart it: "
                     + shlex.join(restart))
    return hints
