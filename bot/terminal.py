"""Pure rendering of operation results for people at a terminal."""

from __future__ import annotations

from commands.findings import Finding
from commands.operation import OperationResult
from commands.restore_plan import RestorePlan

MARKS = {"pass": "✓ pass ", "fail": "✗ FAIL ", "warn": "! warn ", "error": "? error"}
VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "error": "COULD NOT CHECK"}


def render_result(result: OperationResult, *, verbose: bool = False) -> str:
    lines = [
        f"proofbot {result.operation} {result.host}: {VERDICT_WORDS[result.verdict]} "
        f"({len(result.checks)} checks in {result.duration_s:.2f} s, operation {result.operation_id})",
    ]
    width = max((len(finding.name) for finding in result.checks), default=0)
    for finding in result.checks:
        lines.append(f"  {MARKS[finding.status]}  {finding.name.ljust(width)}  {finding.summary}")
        if verbose or finding.status != "pass":
            lines.extend(_evidence_lines(finding))
    counts = {status: sum(1 for f in result.checks if f.status == status) for status in MARKS}
    lines.append("  " + " · ".join(f"{n} {status}" for status, n in counts.items() if n))
    return "\n".join(lines)


def _evidence_lines(finding: Finding) -> list[str]:
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
                         f"{f.live_owner}) → {(f.source_sha or '')[:12]} ({f.source_size} B) at {f.live_path}")
            diff = f.diff.splitlines()
            lines += [f"      {line}" for line in diff[:diff_lines]]
            if len(diff) > diff_lines:
                lines.append(f"      … {len(diff) - diff_lines} more diff lines")
    if plan.extras:
        lines.append("  extra files in watch dirs (moved into the snapshot only with --move-extras): "
                     + ", ".join(plan.extras))
    return "\n".join(lines)
