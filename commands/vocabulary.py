"""proofbot's words, each in one home: check statuses, verdicts, audit event kinds, plan states and operations.

Every enum is a ``StrEnum``, so its members are the very strings the audit DB, ``--json`` and the views
hold (``CheckStatus.PASS == "pass"``), and a DB written before these types existed reads back unchanged.
Only this module and the front-ends' word-and-glyph tables spell these strings out.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class CheckStatus(StrEnum):
    """What one check found."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"  # looked, and something deserves a look, but nothing is proven wrong
    ERROR = "error"  # could not check
    SKIPPED = "skipped"  # deliberately not run: counts for nothing either way


class Verdict(StrEnum):
    """What an operation, a host or a fleet came to. The first three judge checks; the rest end an
    operation before (or instead of) a judgement."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    REFUSED = "refused"
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    EXPIRED = "expired"
    INTERRUPTED = "interrupted"

    @staticmethod
    def of_statuses(statuses: Iterable[CheckStatus | str]) -> Verdict:
        """A definite failure outranks a could-not-check; warnings do not fail; a check deliberately
        not run counts for nothing; nothing checked at all is not a pass."""
        seen = {CheckStatus(status) for status in statuses}
        if CheckStatus.FAIL in seen:
            return Verdict.FAIL
        if CheckStatus.ERROR in seen or not seen - {CheckStatus.SKIPPED}:
            return Verdict.ERROR
        return Verdict.PASS

    @staticmethod
    def worst(verdicts: Iterable[Verdict | str]) -> Verdict:
        """The verdict over several hosts or operations: the highest in ``VERDICT_RANK``; none at all is
        an error (nothing was proven)."""
        ranked = [Verdict(verdict) for verdict in verdicts]
        return max(ranked, key=VERDICT_RANK.index) if ranked else Verdict.ERROR


# Lowest to highest: a fleet's verdict is its worst host's. A refusal (nothing was touched) outranks a pass;
# a could-not-check outranks a refusal; a definite failure outranks everything.
VERDICT_RANK: tuple[Verdict, ...] = (
    Verdict.PASS, Verdict.CANCELLED, Verdict.REJECTED, Verdict.EXPIRED, Verdict.REFUSED, Verdict.INTERRUPTED,
    Verdict.ERROR, Verdict.FAIL,
)

# What each verdict means for the exit status of the CLI (docs/usage.md "Exit codes").
CHECK_VERDICTS = frozenset({Verdict.PASS, Verdict.FAIL, Verdict.ERROR})


class EventKind(StrEnum):
    """The kinds of audit event (the ``events.kind`` column)."""

    REQUESTED = "requested"
    PLAN_SHOWN = "plan-shown"
    APPROVED = "approved"
    REJECTED = "rejected"
    VOTE = "vote"  # one click on a plan that needs several approvals: counted, or why not
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    REFUSED = "refused"
    CHECK = "check"
    STEP = "step"
    INTERRUPTED = "interrupted"
    FINISHED = "finished"
    LOCK_RELEASED_STALE = "lock-released-stale"
    VIEWED = "viewed"
    BOT_STARTED = "bot-started"
    BOT_STOPPED = "bot-stopped"
    WATCH_RUN = "watch-run"  # one run of a watch entry: counts and the hosts that changed
    WATCH_CHANGE = "watch-change"  # one host's confirmed change (its verify's trail is written with it)
    SLACK_LEFT_OUT = "slack-left-out"  # a passing reply a full channel outbox left out of Slack (bot/slack/outbox.py)


# Events after which an operation has ended, whatever else was written.
ENDING_KINDS = frozenset({EventKind.FINISHED, EventKind.REFUSED, EventKind.CANCELLED, EventKind.INTERRUPTED})


class Change(StrEnum):
    """What the watch says about one host whose confirmed state changed (commands/watch/)."""

    FAILED = "failed"  # pass (or not yet known) -> fail
    NEW_CAUSE = "new-cause"  # still failing, for another reason
    RECOVERED = "recovered"  # fail or could-not-check -> pass
    UNCHECKABLE = "uncheckable"  # -> could not check


class PlanState(StrEnum):
    """Where a plan awaiting approval stands (the ``plans.state`` column)."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    APPLIED = "applied"  # approved, and the apply ran
    VOID = "void"  # approved, but the apply was refused (the host changed) or cancelled
    INTERRUPTED = "interrupted"  # approved, the apply started, and its operation was finished interrupted


class Operation(StrEnum):
    """What proofbot does, as the audit log names it (``events.operation``)."""

    VERIFY = "verify"
    RESTORE = "restore"
    RESTART = "restart"
    ROLLOUT = "rollout"  # a rolling restart over a group
    PING = "ping"
    AUDIT = "audit"
    WATCH = "watch"  # a scheduled re-verify (commands/watch/)
    POLICY = "policy"  # who may do what, where (`/policy`, `proofbot policy`): read-only, only a refusal recorded


class Outcome(StrEnum):
    """A host's result as counts lines and groups show it: a verdict, with a pass that carries a warning
    told apart. Listed in the order a reader needs them: what needs a human first."""

    FAIL = "fail"
    ERROR = "error"
    WARN = "warn"
    PASS = "pass"

    @staticmethod
    def of(verdict: Verdict | str, statuses: Iterable[CheckStatus | str]) -> Outcome:
        if verdict == Verdict.PASS:
            return Outcome.WARN if CheckStatus.WARN in {CheckStatus(s) for s in statuses} else Outcome.PASS
        return Outcome.FAIL if verdict == Verdict.FAIL else Outcome.ERROR


class Signal(StrEnum):
    """One signal of a restart as the polls see it (active, health, cmdline, probe)."""

    PENDING = "pending"  # not yet
    OK = "ok"
    FAIL = "fail"
    ERROR = "error"  # cannot tell
    NOT_APPLICABLE = "n/a"


class CommandState(StrEnum):
    """Where a restart's own command stands."""

    NOT_SENT = "not sent"
    RUNNING = "running"
    OK = "ok"
    FAIL = "fail"
    LOST = "lost"  # no exit status: the link dropped
    HUNG = "hung"  # still running at the deadline
