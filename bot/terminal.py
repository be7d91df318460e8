"""Pure rendering of operation results for people at a terminal."""

from __future__ import annotations

from commands.findings import Finding
from commands.operation import OperationResult

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
