"""When each ``watch`` entry runs (every ``every``, a random jitter after its slot) and what a run does: verify
the target, let the state machine judge, post what it says. The clock is injected: tests run a week of
simulated time without sleeping."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from commands.inventory.watch import WatchEntry
from commands.operation import OperationResult
from commands.verify.fleet import FleetResult
from commands.vocabulary import CheckStatus, Verdict
from commands.watch.state import Announcement, HostChange, Result, TargetWatch


class Clock(Protocol):
    """Where the watch reads the time and waits for it."""

    def now(self) -> datetime: ...

    async def sleep_until(self, moment: datetime) -> None: ...


class SystemClock:
    """The wall clock (UTC) and asyncio's sleep."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, moment: datetime) -> None:
        await asyncio.sleep(max(0.0, (moment - self.now()).total_seconds()))


@dataclass(frozen=True)
class TargetRun:
    """One run of an entry: each host's verify (in the order the target names them) and what was said."""

    target: str
    at: datetime
    fleet: FleetResult  # the fleet verify's (its operation id is what a Re-verify button names)
    said: list[Announcement]
    changes: list[HostChange]  # confirmed in this run (said now, or held for the quiet hours' digest)
    held: list[str]  # hosts whose changes wait for the digest

    @property
    def results(self) -> list[OperationResult]:
        return self.fleet.results

    @property
    def verdict(self) -> Verdict:
        return self.fleet.verdict


# Verify the entry's hosts; post one message (with the run's verify, for its evidence); which hosts proofbot
# itself holds, and until when.
VerifyTarget = Callable[[WatchEntry], Awaitable[FleetResult]]
Post = Callable[[WatchEntry, Announcement, FleetResult], Awaitable[None]]
HeldUntil = Callable[[Sequence[str], datetime], Awaitable[Mapping[str, datetime]]]
OnRun = Callable[[TargetRun], Awaitable[None]]


def result_of(operation: OperationResult) -> Result:
    """A host's verify as the watch compares runs: the verdict, and the checks behind it when not a pass."""
    verdict = operation.verdict
    if verdict == Verdict.PASS:
        return Result(Verdict.PASS)
    status = CheckStatus.FAIL if verdict == Verdict.FAIL else CheckStatus.ERROR
    return Result(verdict, frozenset(finding.name for finding in operation.checks if finding.status == status))


async def _nobody_held(_hosts: Sequence[str], _now: datetime) -> Mapping[str, datetime]:
    return {}


@dataclass
class Watch:
    """Every entry's schedule and state; ``run_forever`` until cancelled, or ``run_once`` (cron, CI)."""

    entries: Sequence[WatchEntry]
    verify_target: VerifyTarget
    post: Post
    clock: Clock = field(default_factory=SystemClock)
    held_until: HeldUntil = _nobody_held
    on_run: OnRun | None = None
    rng: random.Random = field(default_factory=random.Random)
    states: dict[str, TargetWatch] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for entry in self.entries:
            self.states[entry.target] = TargetWatch(entry.target, after=entry.after, quiet=entry.quiet_hours)

    async def run_entry(self, entry: WatchEntry) -> TargetRun:
        """Verify the entry's target once, judge the results, post what is to be said."""
        fleet = await self.verify_target(entry)
        now = self.clock.now()
        results = {operation.host: result_of(operation) for operation in fleet.results}
        held = await self.held_until(list(results), now)
        state = self.states[entry.target]
        said = state.observe(now, results, held)
        for announcement in said:
            await self.post(entry, announcement, fleet)
        run = TargetRun(entry.target, now, fleet, said, state.confirmed, [change.host for change in state.held])
        if self.on_run is not None:
            await self.on_run(run)
        return run

    async def run_once(self) -> list[TargetRun]:
        """Every entry once, in the order written (``proofbot watch --once``)."""
        return [await self.run_entry(entry) for entry in self.entries]

    def _jitter(self, entry: WatchEntry) -> timedelta:
        return entry.spread * self.rng.random()

    async def run_forever(self, until: datetime | None = None) -> None:
        """Run each entry at every slot of ``every`` plus a fresh jitter, the earliest due first; one at a
        time, so a run's verify fan-out (``fleet.max_parallel``) is the only bound on hosts in flight.
        ``until`` (simulated time in tests) ends it; else it runs until cancelled."""
        start = self.clock.now()
        slots = {entry.target: start for entry in self.entries}
        due = {entry.target: start + self._jitter(entry) for entry in self.entries}
        by_target = {entry.target: entry for entry in self.entries}
        while due:
            target = min(due, key=lambda name: due[name])
            if until is not None and due[target] >= until:
                return
            await self.clock.sleep_until(due[target])
            entry = by_target[target]
            await self.run_entry(entry)
            # the next slot after now: a run longer than `every` skips slots rather than queueing them
            slots[target] += entry.interval
            while slots[target] <= self.clock.now():
                slots[target] += entry.interval
            due[target] = slots[target] + self._jitter(entry)
