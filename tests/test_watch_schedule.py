"""Tier 1: the watch's schedule on simulated time, with verifies that take no SSH: a slow entry never delays the
others (entries run concurrently, each within its own deadline), and ``--once`` runs every entry at once."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest

from commands.inventory.watch import WatchEntry
from commands.operation import OperationResult
from commands.verify.fleet import FleetResult
from commands.vocabulary import Operation
from commands.watch.schedule import TargetRun, Watch
from commands.watch.state import Announcement
from tests.watch_rig import SimulatedClock

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FAST = WatchEntry(target="fast", every="5m", channel="C0WATCH", jitter="0s")
SLOW = WatchEntry(target="slow", every="5m", channel="C0WATCH", jitter="0s")


def _fleet(target: str) -> FleetResult:
    return FleetResult(f"op-{target}", Operation.VERIFY, target, "", 0.0,
                       [OperationResult(f"op-{target}-1", Operation.VERIFY, f"{target}-1", "", 0.0, [])])


async def _nothing_said(_entry: WatchEntry, _announcement: Announcement, _fleet: FleetResult) -> None:
    """What is said is not what these tests are about (their hosts' results have no checks: could not check)."""


async def test_a_hung_entry_never_delays_the_others_and_is_given_up_at_its_deadline(
        caplog: pytest.LogCaptureFixture) -> None:
    hung = asyncio.Event()  # never set: the slow entry's hosts hang
    runs: list[TargetRun] = []

    async def verify_target(entry: WatchEntry) -> FleetResult:
        if entry.target == "slow":
            await hung.wait()
        return _fleet(entry.target)

    async def on_run(run: TargetRun) -> None:
        runs.append(run)

    watch = Watch([SLOW, FAST], verify_target, _nothing_said, clock=SimulatedClock(START), on_run=on_run,
                  deadline=lambda entry: 0.5 if entry.target == "slow" else 60.0)
    with caplog.at_level(logging.WARNING, logger="commands.watch.schedule"):
        await asyncio.wait_for(watch.run_forever(until=START + 12 * FAST.interval), 60)
    # the fast entry ran every one of its 12 slots while the slow one hung; the slow one was given up, said so
    assert [run.target for run in runs] == ["fast"] * 12
    assert "watch slow: the run was given up past its deadline" in caplog.text


async def test_once_runs_the_entries_at_once_and_returns_them_in_the_order_written() -> None:
    both_started = asyncio.Barrier(2)  # each verify waits for the other: one at a time would never end

    async def verify_target(entry: WatchEntry) -> FleetResult:
        await both_started.wait()
        return _fleet(entry.target)

    watch = Watch([SLOW, FAST], verify_target, _nothing_said, clock=SimulatedClock(START))
    runs = await asyncio.wait_for(watch.run_once(), 30)
    assert [run.target for run in runs] == ["slow", "fast"]


async def test_a_watch_stopped_while_posting_still_records_that_run() -> None:
    posting, release = asyncio.Event(), asyncio.Event()
    recorded: list[TargetRun] = []

    async def post(_entry: WatchEntry, _announcement: Announcement, _fleet: FleetResult) -> None:
        posting.set()
        await release.wait()  # Slack answering slowly while serve stops

    async def on_run(run: TargetRun) -> None:
        recorded.append(run)

    entry = WatchEntry(target="fast", every="5m", channel="C0WATCH", jitter="0s", after=1)
    watch = Watch([entry], lambda e: asyncio.sleep(0, _fleet(e.target)), post, clock=SimulatedClock(START),
                  on_run=on_run)
    task = asyncio.create_task(watch.run_forever())
    await asyncio.wait_for(posting.wait(), 30)
    task.cancel()  # serve's stop_watch
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    # the change was posted: its run is in the log, so a restarted watch does not say it again
    assert [run.target for run in recorded] == ["fast"] and recorded[0].said
