"""When each ``watch`` entry runs (every ``every``, a random jitter after its slot) and what a run does: verify
the target, let the state machine judge, post what it says. The clock is injected: tests run a week of
simulated time without sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from commands.inventory.watch import WatchEntry
from commands.operation import OperationResult
from commands.verify.fleet import FleetResult
from commands.vocabulary import CheckStatus, Verdict
from commands.watch.state import Announcement, HostChange, HostState, Result, TargetWatch

log = logging.getLogger(__name__)
# Entries run at once, at most: each is a fleet verify of up to `fleet.max_parallel` hosts, so a slow entry
# never delays the others, and hosts in flight stay within this many times max_parallel.
ENTRIES_IN_FLIGHT = 4
SAY_GRACE_S = 10.0  # how long a stopping watch waits for a run's posts and log entry to end


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
    # What a restart must not forget (commands/watch/memory.py): runs of results not yet confirmed, the
    # changes held for the digest, and since when this entry is watched.
    pending: Mapping[str, HostState] = field(default_factory=dict)
    digest: tuple[HostChange, ...] = ()
    watching_since: datetime | None = None

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
    in_flight: int = ENTRIES_IN_FLIGHT
    # How long one entry's verify may take (seconds); default its `every`: a run that outlasts its interval is
    # given up (said in the log, nothing judged) and the entry runs again at its next slot.
    deadline: Callable[[WatchEntry], float] | None = None

    def __post_init__(self) -> None:
        for entry in self.entries:
            self.states[entry.target] = TargetWatch(entry.target, after=entry.after, quiet=entry.quiet_hours)

    async def run_entry(self, entry: WatchEntry) -> TargetRun:
        """Verify the entry's target once (within its deadline: TimeoutError past it), judge the results, post
        what is to be said and record the run. Cancelled (serve stopping) while judging, posting or recording,
        that part still ends (within ``SAY_GRACE_S``): a change posted but not in the log would be said again
        by the next serve."""
        async with asyncio.timeout(self.deadline(entry) if self.deadline else entry.interval.total_seconds()):
            fleet = await self.verify_target(entry)
        saying = asyncio.ensure_future(self._judge_and_say(entry, fleet))
        try:
            return await asyncio.shield(saying)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(saying, SAY_GRACE_S)
            raise

    async def _judge_and_say(self, entry: WatchEntry, fleet: FleetResult) -> TargetRun:
        """Recorded first, then posted: a process killed between the two has its change in the log, and the next
        serve finds the message in Slack by its key or posts it then (bot/slack/watch_resend.py); killed after
        the post, the change is already known. Never said twice, never lost."""
        now = self.clock.now()
        results = {operation.host: result_of(operation) for operation in fleet.results}
        held = await self.held_until(list(results), now)
        state = self.states[entry.target]
        said = state.observe(now, results, held)
        run = TargetRun(entry.target, now, fleet, said, state.confirmed, [change.host for change in state.held],
                        state.pending(), tuple(state.held), state.watching_since)
        if self.on_run is not None:
            await self.on_run(run)
        for announcement in said:
            await self.post(entry, announcement, fleet)
        return run

    async def run_once(self) -> list[TargetRun]:
        """Every entry once, concurrently (``proofbot watch --once``); the runs in the order written."""
        limit = asyncio.Semaphore(self.in_flight)

        async def bounded(entry: WatchEntry) -> TargetRun:
            async with limit:
                return await self.run_entry(entry)

        return list(await asyncio.gather(*(bounded(entry) for entry in self.entries)))

    def _jitter(self, entry: WatchEntry) -> timedelta:
        return entry.spread * self.rng.random()

    async def _run_within(self, entry: WatchEntry, limit: asyncio.Semaphore) -> datetime:
        """One run; returns when its verify ended (what its next slot is counted from)."""
        async with limit:
            try:
                return (await self.run_entry(entry)).at
            except TimeoutError:
                log.warning("watch %s: the run was given up past its deadline; it runs again at its next slot",
                            entry.target)
                return self.clock.now()

    async def run_forever(self, until: datetime | None = None) -> None:
        """Run each entry at every slot of ``every`` plus a fresh jitter: entries concurrently (at most
        ``in_flight`` at once, each run within its deadline), one run of an entry at a time. ``until``
        (simulated time in tests) ends it once every run due before it is done; else it runs until cancelled."""
        start = self.clock.now()
        slots = {entry.target: start for entry in self.entries}
        due = {entry.target: start + self._jitter(entry) for entry in self.entries}
        by_target = {entry.target: entry for entry in self.entries}
        limit = asyncio.Semaphore(self.in_flight)
        running: dict[str, asyncio.Task[datetime]] = {}
        try:
            while True:
                waiting = {target: moment for target, moment in due.items() if target not in running
                           and (until is None or moment < until)}
                if not waiting and not running:
                    return
                ready = [target for target, moment in waiting.items() if moment <= self.clock.now()]
                for target in sorted(ready, key=lambda name: due[name]):
                    running[target] = asyncio.create_task(self._run_within(by_target[target], limit),
                                                          name=f"proofbot-watch-{target}")
                if ready:
                    continue
                sleeper = asyncio.create_task(self.clock.sleep_until(min(waiting.values()))) if waiting else None
                await asyncio.wait({*running.values(), *([sleeper] if sleeper else [])},
                                   return_when=asyncio.FIRST_COMPLETED)
                if sleeper is not None and not sleeper.done():
                    sleeper.cancel()
                    await asyncio.gather(sleeper, return_exceptions=True)
                for target, task in list(running.items()):
                    if task.done():
                        del running[target]
                        ended = task.result()  # a run that failed (not a timeout: a bug, the audit DB) stops it
                        # the next slot after its verify ended: a run longer than `every` skips slots, never queues
                        entry = by_target[target]
                        slots[target] += entry.interval
                        while slots[target] <= ended:
                            slots[target] += entry.interval
                        due[target] = slots[target] + self._jitter(entry)
        finally:
            for task in running.values():
                task.cancel()
            await asyncio.gather(*running.values(), return_exceptions=True)
