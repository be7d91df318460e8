"""Hosts grouped by identical outcome (like ``dshbak -c``): the same non-passing checks with the same
summaries, read with the host's own name, address and numbers taken out. Pure; no I/O."""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from commands.operation import OperationResult
from commands.vocabulary import CheckStatus, Outcome

# A group's order: what needs a human first (``Outcome`` is listed in that order).
_ORDER = list(Outcome)
# Per-host particulars that differ between hosts in the same state: PIDs, times, durations, ages.
_PARTICULARS = (
    (r"\bPID \d+", "PID …"),
    (r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?Z?", "…"),
    (r"\b\d\d:\d\d(:\d\d)?( UTC)?\b", "…"),
    (r"\b\d+(\.\d+)?\s?(ms|s|min|h|d|sec|seconds?|minutes?|hours?|days?)\b", "… \\2"),
)


@functools.cache
def _particulars() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Compiled on first use: only a host that did not pass is read without its particulars (not a --json run's)."""
    return tuple((re.compile(pattern), replacement) for pattern, replacement in _PARTICULARS)


class OutcomeGroup(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    """Hosts whose results read the same; ``example`` is the first of them, whose evidence is shown."""

    outcome: Outcome  # warn is a pass with a warning
    signature: tuple[tuple[str, str, str], ...]  # (check, status, summary read without host particulars)
    hosts: tuple[str, ...]
    example: OperationResult


def outcome_of(result: OperationResult) -> Outcome:
    """A host's verify as counts and groups show it (``Outcome.of``)."""
    return Outcome.of(result.verdict, (finding.status for finding in result.checks))


def signature_of(result: OperationResult, address: str | None = None) -> tuple[tuple[str, str, str], ...]:
    """The non-passing checks as they read on any host: passing and skipped checks are left out."""
    return tuple((finding.name, finding.status, _general(finding.summary, result.host, address))
                 for finding in result.checks if finding.status not in (CheckStatus.PASS, CheckStatus.SKIPPED))


def group_outcomes(results: list[OperationResult], addresses: dict[str, str] | None = None) -> list[OutcomeGroup]:
    """Groups of identical outcomes: failing first, then could-not-check, warnings, passes; bigger first
    within each; hosts in the order given. All passing hosts without a warning form one group."""
    addresses = addresses or {}
    members: dict[tuple[Outcome, tuple[tuple[str, str, str], ...]], list[OperationResult]] = {}
    for result in results:
        outcome = outcome_of(result)
        signature = () if outcome == Outcome.PASS else signature_of(result, addresses.get(result.host))
        members.setdefault((outcome, signature), []).append(result)
    groups = [OutcomeGroup(outcome, signature, tuple(r.host for r in same), same[0])
              for (outcome, signature), same in members.items()]
    return sorted(groups, key=lambda group: (_ORDER.index(group.outcome), -len(group.hosts)))


def _general(summary: str, host: str, address: str | None) -> str:
    text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", "{host}", summary)
    if address:
        text = text.replace(address, "{address}")
    for pattern, replacement in _particulars():
        text = pattern.sub(replacement, text)
    return text
