"""The words both front-ends share (the CLI and the demo print them, Slack quotes them): the vocabulary's
words, counts lines, and glyph-free phrasing of verdicts, approvals, times and audit records.

``VERDICT_WORDS``, ``OUTCOME_WORDS``, ``ROLLOUT_WORDS`` and ``COUNT_WORDS`` are the one table of words per
``commands.vocabulary`` enum; each front-end's glyphs are its own (``bot.cli.marks``, ``bot.slack.emoji``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import TYPE_CHECKING, ParamSpec

from commands.inventory.containers import CONTAINER_MANAGERS
from commands.redact import redact
from commands.registry import OPERATIONS
from commands.store import IN_PROGRESS
from commands.vocabulary import CheckStatus, Outcome, PlanState, Verdict

if TYPE_CHECKING:  # types only: rendering a verify must not load the restart code
    from commands.operation import OperationResult
    from commands.restart.rollout import RolloutPlan
    from commands.store.trail import OperationRecord

# -- the words table: each enum member as both front-ends say it ------------------------------------------
VERDICT_WORDS: dict[str, str] = {Verdict.PASS: "PASS", Verdict.FAIL: "FAIL", Verdict.ERROR: "COULD NOT CHECK",
                                 IN_PROGRESS: "IN PROGRESS"}
OUTCOME_WORDS: dict[str, str] = {Outcome.FAIL: "FAIL", Outcome.ERROR: "COULD NOT CHECK",
                                 Outcome.WARN: "PASS with warnings", Outcome.PASS: "PASS"}
ROLLOUT_WORDS: dict[str, str] = {**VERDICT_WORDS, Verdict.REFUSED: "HALTED, NOT ALL RESTARTED"}
# A counts line's word after each number, in the order the line reads.
COUNT_WORDS: dict[str, str] = {Outcome.PASS: "pass", Outcome.WARN: "warn", Outcome.FAIL: "fail",
                               Outcome.ERROR: "could not check"}
FLEET_COUNT_WORDS = tuple(COUNT_WORDS.items())  # (outcome, word) pairs: the keys of a fleet's JSON counts
DECISION_WORDS: dict[str, str] = {PlanState.APPROVED: "approved by {}", PlanState.REJECTED: "rejected by {}",
                                  PlanState.EXPIRED: "approval expired"}


P = ParamSpec("P")


def final_text(render: Callable[P, str]) -> Callable[P, str]:
    """The last gate before a terminal or Slack: whatever a renderer quotes (a URL from the
    inventory, a plan field) leaves masked, even if a caller forgot to redact it."""
    @wraps(render)
    def redacted(*args: P.args, **kwargs: P.kwargs) -> str:
        return redact(render(*args, **kwargs))
    return redacted


def verdict_word(verdict: str) -> str:
    return VERDICT_WORDS.get(verdict, verdict.upper())


def plural(count: int, noun: str) -> str:
    """``1 host``, ``3 hosts``."""
    return f"{count} {noun}{'s' if count != 1 else ''}"


def counts_words(counts: Mapping[str, int]) -> str:
    """``15 pass · 5 fail · 1 could not check``: the outcomes in ``COUNT_WORDS``' order, then any other
    operation's own (a rolling restart's ``2 done · 1 failed · 1 untouched``) as recorded."""
    words = [f"{counts[key]} {text}" for key, text in COUNT_WORDS.items() if counts.get(key)]
    return " · ".join(words + [f"{n} {key}" for key, n in counts.items() if key not in COUNT_WORDS and n])


def no_thread(via: str | None) -> str:
    """Where an operation with no Slack thread came from (the CLI, the demo)."""
    return f"(from the {via if via and via != 'cli' else 'CLI'}, no thread)"


def approval_words(record: OperationRecord, *, actor: str | None) -> str:
    """'approved by X', 'rejected by X', 'approval expired', or why there is none."""
    decided = DECISION_WORDS.get(record.decision or "")
    if decided is not None:
        return decided.format(actor)
    mutating = any(spec.name == record.operation and spec.mutating for spec in OPERATIONS)
    return "no approval recorded" if mutating else "no approval needed"


def when(at: str | None) -> str:
    """'2026-05-22T10:00:00.123Z' as '2026-05-22 10:00:00Z'."""
    if not at:
        return "-"
    return at.replace("T", " ").split(".")[0].rstrip("Z") + "Z"


def operation_words(record: OperationRecord) -> str:
    """What ran, on what: ``verify ct129``, or a fleet's ``verify gpu-west (21 hosts)``."""
    if record.fleet:
        return f"{record.operation or '?'} {record.fleet.target} ({plural(record.fleet.hosts, 'host')})"
    return f"{record.operation or '?'} {record.host or '?'}"


def fleet_words(record: OperationRecord) -> str:
    """A fleet's counts (`` · 15 pass · 5 fail``), or the fleet a host's part belonged to; else ''."""
    if record.fleet and record.fleet.counts:
        return " · " + counts_words(record.fleet.counts)
    if record.part_of:
        part = record.part_of
        return f" · part of {record.operation or '?'} {part.target} ({part.operation_id})"
    return ""


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shorten_middle(text: str, limit: int) -> str:
    """A command line's program and its last flags (where launch options differ), the middle cut."""
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + "…" + text[len(text) - (limit - head - 1):]


def rollout_proof_words(plan: RolloutPlan) -> str:
    """What each host must prove before the next batch starts (from its first host's service)."""
    first = plan.hosts[0].service if plan.hosts else None
    probe = ", one real request" if first is not None and first.probe else ""
    if first is not None and first.manager in CONTAINER_MANAGERS:
        return f"a new StartedAt and PID, up min_uptime_s and not restarting, health 200, the cmdline flags{probe}"
    return f"a NEW main PID, the unit active, health 200, the cmdline flags{probe}"


def runs_old_code(result: OperationResult) -> bool:
    """The service is older than files it runs: Slack's thread offers "Restart now", the CLI says restart."""
    return any(f.name == "stale-process" and f.status == CheckStatus.WARN for f in result.checks)


def warned_checks(result: OperationResult) -> list[str]:
    """The checks of a passing result that warned (its outcome is ``warn`` exactly when there are some)."""
    if Outcome.of(result.verdict, (f.status for f in result.checks)) != Outcome.WARN:
        return []
    return [f.name for f in result.checks if f.status == CheckStatus.WARN]
