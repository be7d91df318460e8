"""The watch's pure state machine: each run's results in, the changes to announce out. A change counts only
after ``after`` identical results in a row; a host held by proofbot's own restore or restart says nothing;
quiet hours hold messages for one digest. No clock, no I/O: the caller passes ``now``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from commands.inventory.watch import DEFAULT_AFTER, QuietHours
from commands.vocabulary import Change, Verdict


@dataclass(frozen=True)
class Result:
    """One host's verify as the watch compares it: its verdict and, when failing, which checks failed."""

    verdict: Verdict  # PASS, FAIL or ERROR (could not check)
    causes: frozenset[str] = frozenset()  # failing (or could-not-check) checks' names; a new one is a change


@dataclass(frozen=True)
class HostChange:
    """One host's confirmed change: what it was, what it is now, and since when."""

    host: str
    change: Change
    before: Result | None  # None: the watch had not yet confirmed a state for it
    now: Result
    since: datetime  # the first of the ``after`` identical results
    # Held through quiet hours: this host's earlier changes in the same quiet hours (a host that failed and
    # recovered is one line of the digest: failed at X, recovered at Y), oldest first.
    earlier: tuple[HostChange, ...] = ()


@dataclass(frozen=True)
class Announcement:
    """One message to post: every host that changed together (or, at the end of quiet hours, while quiet)."""

    target: str
    changes: tuple[HostChange, ...]
    digest: bool = False  # held through quiet hours


@dataclass(frozen=True)
class HostState:
    """What the watch knows of one host: its confirmed result and since when, and the run of identical
    results that may replace it."""

    confirmed: Result | None = None
    since: datetime | None = None
    candidate: Result | None = None
    streak: int = 0
    streak_since: datetime | None = None


def _change(before: Result | None, now: Result) -> Change | None:
    """What confirming ``now`` over ``before`` means; None when it is not news (a first pass, the same)."""
    if before == now:
        return None
    if now.verdict == Verdict.PASS:
        return Change.RECOVERED if before is not None else None
    if now.verdict == Verdict.ERROR:
        return Change.UNCHECKABLE
    return Change.NEW_CAUSE if before is not None and before.verdict == Verdict.FAIL else Change.FAILED


def step(state: HostState, result: Result, now: datetime, after: int) -> tuple[HostState, Change | None]:
    """One result for one host: the new state, and the change confirmed by it (if any)."""
    if result == state.candidate:
        state = replace(state, streak=state.streak + 1)
    else:
        state = replace(state, candidate=result, streak=1, streak_since=now)
    if state.streak < after or state.confirmed == result:
        return state, None
    change = _change(state.confirmed, result)
    return replace(state, confirmed=result, since=state.streak_since), change


@dataclass
class TargetWatch:
    """One ``watch`` entry's hosts and the messages held through quiet hours."""

    target: str
    after: int = DEFAULT_AFTER
    quiet: QuietHours | None = None
    hosts: dict[str, HostState] = field(default_factory=dict)
    held: list[HostChange] = field(default_factory=list)  # one per host, its earlier held changes folded in
    confirmed: list[HostChange] = field(default_factory=list)  # the last run's changes, said now or held
    watching_since: datetime | None = None  # the first run of this entry (kept across restarts)

    def hold(self, change: HostChange) -> None:
        """Keep a change for the digest; a host already held keeps one entry, its earlier changes in it."""
        for index, old in enumerate(self.held):
            if old.host == change.host:
                self.held[index] = replace(change, before=old.before,
                                           earlier=(*old.earlier, replace(old, earlier=())))
                return
        self.held.append(change)

    def pending(self) -> dict[str, HostState]:
        """The hosts with a run of results that may still replace what is confirmed (what a restart must not
        forget); a host's first passes, with nothing confirmed yet, are not news and are left out."""
        return {host: state for host, state in self.hosts.items()
                if state.candidate is not None and state.candidate != state.confirmed
                and not (state.confirmed is None and state.candidate.verdict == Verdict.PASS)}

    def observe(self, now: datetime, results: Mapping[str, Result],
                held_until: Mapping[str, datetime] | None = None) -> list[Announcement]:
        """One run's results: the messages to post now (at most one change message, or one digest and one
        change message when quiet hours have just ended). A host that proofbot itself holds (a restore or
        restart, and its ready time after: ``held_until``) forgets its run of results and says nothing."""
        holds = held_until or {}
        if self.watching_since is None:
            self.watching_since = now
        changes: list[HostChange] = []
        for host, result in results.items():
            state = self.hosts.get(host, HostState())
            if host in holds and now < holds[host]:
                # Its own restart is not drift: what it comes to is judged from fresh results after.
                self.hosts[host] = replace(state, candidate=None, streak=0, streak_since=None)
                continue
            self.hosts[host], change = step(state, result, now, self.after)
            if change is not None:
                changes.append(HostChange(host, change, state.confirmed, result, self.hosts[host].since or now))
        self.confirmed = changes
        if self.quiet is not None and self.quiet.contains(now):
            for held in changes:
                self.hold(held)
            return []
        out: list[Announcement] = []
        if self.held:
            out.append(Announcement(self.target, tuple(self.held), digest=True))
            self.held = []
        if changes:
            out.append(Announcement(self.target, tuple(changes)))
        return out
