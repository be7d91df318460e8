"""A fleet verify for a terminal and for ``--json``: pure functions from a ``FleetResult`` to text or a dict.

The text reads like ``dshbak -c``: one line of counts, then hosts grouped by identical outcome,
failing groups first, each group's non-passing checks with the evidence of ONE of its hosts
(the others' evidence is in the audit log and ``--json``), and all clean passes as one line of
names. The exit code is the worst host's (README "Using it").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from bot.cli.marks import EXIT_FOR_VERDICT, MARKS
from bot.cli.output import SCHEMA_VERSION
from bot.cli.results_text import finding_lines
from bot.typed_command import command_line
from bot.words import FLEET_COUNT_WORDS, VERDICT_WORDS, final_text
from bot.words import counts_words as fleet_counts_words
from commands.fleet.grouping import OutcomeGroup, group_outcomes, outcome_of
from commands.fleet.names import compress_names
from commands.operation import OperationResult
from commands.redact import redact_data
from commands.verify.fleet import FleetResult
from commands.vocabulary import CheckStatus, Outcome, Verdict

SAME_CAUSE = "not checked: the same cause"  # commands.verify.operation's words for the checks a cause stopped
GROUP_WORDS = {Outcome.FAIL: "✗ FAIL", Outcome.ERROR: "? COULD NOT CHECK", Outcome.WARN: "! PASS WITH A WARNING",
               Outcome.PASS: "✓ PASS"}


def counts_line(fleet: FleetResult) -> str:
    """``50 hosts · 46 pass · 3 fail · 1 could not check · 12.3 s``."""
    total = len(fleet.results)
    parts = [f"{total} host{'s' if total != 1 else ''}", fleet_counts_words(fleet.counts())]
    return " · ".join([*filter(None, parts), f"{fleet.duration_s:.1f} s"])


@final_text
def render_fleet(fleet: FleetResult, *, addresses: Mapping[str, str] | None = None,
                 without_backup: Mapping[str, str] | None = None, verbose: bool = False) -> str:
    lines = [f"proofbot {fleet.operation} {fleet.target}: {VERDICT_WORDS[fleet.verdict]} · {counts_line(fleet)}"]
    lines += _without_backup_lines(without_backup or {})
    for group in group_outcomes(fleet.results, dict(addresses or {})):
        lines.append("")
        lines += _group_lines(group, verbose=verbose)
    lines.append("")
    lines.append(f"operation {fleet.operation_id}: `{command_line('audit')}` lists it; each host's own part in "
                 f"`{command_line('audit', 'HOST')}`")
    return "\n".join(lines)


@final_text
def progress_text(done: Sequence[OperationResult], hosts: Sequence[str]) -> str:
    """The live line while a fleet runs: ``31/50 hosts · 27 ✓ · 3 ✗ · 1 ? · waiting on ct133, ct140 +17``,
    so a host that hangs is named while it hangs, not only at the end."""
    outcomes = Counter(outcome_of(result) for result in done)
    finished = {result.host for result in done}
    waiting = [host for host in hosts if host not in finished]
    parts = [f"{len(done)}/{len(hosts)} hosts", f"{outcomes[Outcome.PASS] + outcomes[Outcome.WARN]} ✓"]
    parts += [f"{outcomes[key]} {mark}" for key, mark in ((Outcome.FAIL, "✗"), (Outcome.ERROR, "?")) if outcomes[key]]
    if waiting:
        more = f" +{len(waiting) - 3}" if len(waiting) > 3 else ""
        parts.append(f"waiting on {', '.join(waiting[:3])}{more}")
    return " · ".join(parts)


def _group_lines(group: OutcomeGroup, *, verbose: bool) -> list[str]:
    count = len(group.hosts)
    head = f"{GROUP_WORDS[group.outcome]} · {count} host{'s' if count != 1 else ''}: {compress_names(group.hosts)}"
    if group.outcome == Outcome.PASS and not verbose:
        return [head]
    example = group.example
    if count > 1:
        head += f"  (evidence from {example.host}; the others' in `proofbot audit HOST` and --json)"
    shown = [f for f in example.checks if verbose or f.status not in (CheckStatus.PASS, CheckStatus.SKIPPED)]
    same_cause = [f for f in shown if CheckStatus(f.status) == CheckStatus.ERROR and f.evidence is None
                  and f.summary.startswith(SAME_CAUSE)]
    if len(same_cause) > 1:  # one line for the checks a timeout or a lost link stopped, not one each
        shown = [f for f in shown if f not in same_cause]
    lines = [head, *finding_lines(shown, verbose=verbose)]
    if len(same_cause) > 1:
        lines.append(f"  {MARKS[CheckStatus.ERROR]}  {len(same_cause)} more {SAME_CAUSE}: "
                     + ", ".join(f.name for f in same_cause))
    if not verbose:
        for status in (CheckStatus.PASS, CheckStatus.SKIPPED):
            names = [f.name for f in example.checks if f.status == status]
            if names:
                lines.append(f"  {MARKS[status]}  also: {', '.join(names)}")
    return lines


def _without_backup_lines(without_backup: Mapping[str, str]) -> list[str]:
    """Hosts whose files were not compared, grouped by why: said once, plainly, before anything else."""
    by_reason: dict[str, list[str]] = {}
    for host, reason in without_backup.items():
        by_reason.setdefault(reason, []).append(host)
    return [f"  {MARKS[CheckStatus.SKIPPED].strip()} {compress_names(hosts)}: {reason}: verified without files"
            for reason, hosts in by_reason.items()]


def fleet_json(fleet: FleetResult, *, without_backup: Mapping[str, str] | None = None) -> dict[str, Any]:
    """README's fleet object: the fleet's verdict and counts, and each host's object as one host prints it."""
    counts = fleet.counts()
    head = redact_data({
        "schema_version": SCHEMA_VERSION,
        "operation": fleet.operation,
        "operation_id": fleet.operation_id,
        "target": fleet.target,
        "verdict": fleet.verdict,
        "counts": {key: counts[key] for key, _ in FLEET_COUNT_WORDS},
        "started_at": fleet.started_at,
        "duration_s": round(fleet.duration_s, 3),
        "without_backup": [{"host": host, "reason": reason} for host, reason in (without_backup or {}).items()],
    })
    return {**head, "hosts": [result.to_json() for result in fleet.results]}  # each redacted by its to_json


def fleet_exit_code(fleet: FleetResult, *, strict: bool = False) -> int:
    """The worst host's: a failure (1) outranks a could-not-check (3); ``strict``: a warning exits 1."""
    if strict and fleet.verdict == Verdict.PASS and fleet.counts()[Outcome.WARN]:
        return 1
    return EXIT_FOR_VERDICT[fleet.verdict]
