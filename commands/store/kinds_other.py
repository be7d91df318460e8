"""The audit event kinds a verify never writes (decisions, refusals, a change's steps, the bot's and the watch's own),
one dataclass each, as commands/store/kinds.py holds the ones it does: loaded on first use (``kinds.Vote`` works too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from commands.store.kinds import EventBody
from commands.vocabulary import EventKind, Verdict


@dataclass(frozen=True)
class PlanShown(EventBody):
    """The plan as shown to whoever approves it: the plan's own JSON is the details."""

    KIND = EventKind.PLAN_SHOWN
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Approved(EventBody):
    """A decision on a plan (its actor is the approver): which plan, whose, and why when one was given."""

    KIND = EventKind.APPROVED
    plan_hash: str
    requested_by: str
    reason: str | None = None
    policy: Mapping[str, Any] | None = None  # the policy that applied: its index and text (issue 24)
    approvals: list[str] | None = None  # every approval counted, in order


@dataclass(frozen=True)
class Vote(EventBody):
    """A click on a plan judged against its policy (its actor is the clicker): counted toward
    ``required``, or why it did not count; and the approvals counted so far."""

    KIND = EventKind.VOTE
    decision: str
    user: str
    counted: bool
    approvals: list[str]
    required: int
    policy: Mapping[str, Any]
    why: str | None = None


@dataclass(frozen=True)
class Rejected(Approved):
    """A plan rejected (its actor is who rejected it): the same shape as an approval."""

    KIND = EventKind.REJECTED


@dataclass(frozen=True)
class Expired(EventBody):
    """A plan not decided in time: when it expired, and who clicked after that."""

    KIND = EventKind.EXPIRED
    expired_at: str
    clicked_by: str | None = None  # an approval clicked after the plan expired


@dataclass(frozen=True)
class Cancelled(EventBody):
    """The requester declined at their own prompt, before any approval."""

    KIND = EventKind.CANCELLED
    reason: str
    plan_hash: str | None = None


@dataclass(frozen=True)
class Refusal(EventBody):
    """A request refused, by either front-end, before it became an operation (``requested_host`` and
    ``origin`` say what was asked, by whom, where), or an operation refused on the way (a plan void, a
    host busy: ``plan_hash``, ``holder``). One shape for both front-ends (migration 8's ``refusals``)."""

    KIND = EventKind.REFUSED
    reason: str
    requested_host: str | None = None
    origin: Mapping[str, Any] | None = None
    text: str | None = None  # the command's text as typed in Slack
    running: list[Any] | None = None  # the operations that kept a host busy
    holder: Mapping[str, Any] | None = None
    plan_hash: str | None = None


@dataclass(frozen=True)
class Step(EventBody):
    """One step of a change: a restore's written file (a finding), or a restart's or rollout's
    moment (``step`` names it: before, restart-sent, ready, batch, halted…)."""

    KIND = EventKind.STEP
    step: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Interrupted(EventBody):
    """The run stopped on an exception: what was known then."""

    KIND = EventKind.INTERRUPTED
    reason: str
    what_is_known: Any = None  # a restart's timeline
    outcomes: Mapping[str, str] | None = None  # a rollout's hosts, by state


@dataclass(frozen=True)
class LockReleasedStale(EventBody):
    """A host's lock freed because its holder is gone: why, whose it was, and for which operation."""

    KIND = EventKind.LOCK_RELEASED_STALE
    reason: str
    holder: Mapping[str, Any]
    released_for: str | None = None


@dataclass(frozen=True)
class Viewed(EventBody):
    """The trail was read: who looked, where, at what."""

    KIND = EventKind.VIEWED
    limit: int
    origin: Mapping[str, Any]
    listed: list[str]


@dataclass(frozen=True)
class BotStarted(EventBody):
    """The bot started: in which mode, for which hosts."""

    KIND = EventKind.BOT_STARTED
    mode: str
    hosts: list[str]


@dataclass(frozen=True)
class BotStopped(EventBody):
    """The bot stopped on its own (a signal, its end)."""

    KIND = EventKind.BOT_STOPPED


@dataclass(frozen=True)
class SlackLeftOut(EventBody):
    """A passing check's reply a channel's full outbox left out of its Slack thread (the thread's summary, read
    from this log, still lists the check): where, and its first line."""

    KIND = EventKind.SLACK_LEFT_OUT
    channel: str
    thread_ts: str | None
    text: str


@dataclass(frozen=True)
class WatchRun(EventBody):
    """One run of a ``watch`` entry, compact: its target, hosts by outcome, and the hosts whose confirmed
    state changed (each with a ``watch-change`` of its own); a steady fleet writes only these."""

    KIND = EventKind.WATCH_RUN
    target: str
    counts: Mapping[str, int]
    changed: list[str]
    held: list[str] | None = None  # changes kept for the quiet hours' digest
    # What a restart of the watch must not forget (commands/watch/memory.py), each only when there is some:
    # hosts' runs of results not yet confirmed, the changes held for the digest, the entry's first run.
    pending: Mapping[str, Any] | None = None
    digest: list[Mapping[str, Any]] | None = None
    watching_since: str | None = None


@dataclass(frozen=True)
class WatchChange(EventBody):
    """One host's confirmed change as the watch said it: which, to what, since when, and the verify (its
    operation id) whose whole trail is in the log beside it."""

    KIND = EventKind.WATCH_CHANGE
    change: str
    verdict: Verdict | str
    causes: list[str]
    since: str
    verify_operation_id: str
