"""Tier 1: the watch over 100 inventory hosts, each verified for real over SSH on loopback lab hosts, inside
``serve``'s warm pool, on simulated time: 20 hosts breaking at once are one message naming the 20, nothing else."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest_asyncio

from bot.demo.host import ORIGINAL_FILES, PATCHED_SPEC_INFO, DemoHost, demo_host
from commands.ssh import open_connections, warm_connections
from commands.vocabulary import Change, EventKind, Verdict
from tests.watch_rig import watch_into_slack, watch_inventory

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # 13:00 in Berlin: no quiet hours
BROKEN = [f"ct{n}" for n in range(400, 420)]  # 20 names of the one host the test patches
STEADY = [f"ct{n}" for n in range(500, 580)]  # 80 names of the clean host


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def breaking_host() -> AsyncIterator[DemoHost]:
    """A passing loopback host of this module's own: the test patches its file."""
    async with demo_host("ct400", patched=False, extra_file=False, flags=["--speculative-algorithm", "NEXTN"]) as host:
        yield host


async def test_twenty_hosts_breaking_at_once_are_one_message(tmp_path: Path, breaking_host: DemoHost,
                                                             clean_host: DemoHost) -> None:
    (breaking_host.live_dir / "spec_info.py").write_text(ORIGINAL_FILES["spec_info.py"])
    inventory = watch_inventory(
        tmp_path, {"gpu": [(name, breaking_host) for name in BROKEN] + [(name, clean_host) for name in STEADY]},
        [{"target": "gpu", "every": "5m", "channel": "C0WATCH", "jitter": "30s", "after": 2}],
        ssh={"max_connections": 128},  # every name stays warm between runs, as serve's pool keeps them
        # 80 of the names are one loopback host (one sshd, one HTTP server) on a machine a CI run loads: the
        # default 32 verifies in flight at once overran it there (health slower than its 5 s: a true FAIL of
        # that host); 8 at a time is what a fleet of separate hosts each sees, one verify at a time
        fleet={"max_parallel": 8})

    def patch_after_first(run: int) -> None:
        if run == 0:
            (breaking_host.live_dir / "spec_info.py").write_text(PATCHED_SPEC_INFO)

    try:
        async with warm_connections():
            posted, runs = await watch_into_slack(inventory, tmp_path, START, 3, patch_after_first)
        assert open_connections() == 0  # the pool closed every warm connection on leaving
    finally:
        (breaking_host.live_dir / "spec_info.py").write_text(ORIGINAL_FILES["spec_info.py"])
    assert [len(run.results) for run in runs] == [100] * 3
    assert [sorted(r.host for r in run.results if r.verdict == Verdict.FAIL) for run in runs] == [[]] + [BROKEN] * 2
    # one message for the 20, said when the second failing run confirmed it (after: 2), and nothing else
    assert posted.slack == [("watch gpu: 20 hosts now failing", ["Group 1 of 1: FAIL on 20 hosts"])]
    assert posted.hosts() == [sorted((name, Change.FAILED) for name in BROKEN)]
    assert [run.said != [] for run in runs] == [False, False, True]
    with closing(sqlite3.connect(tmp_path / "audit.db")) as conn:
        changes = conn.execute("SELECT count(*) FROM events WHERE kind = ?", (EventKind.WATCH_CHANGE,)).fetchone()
    assert changes == (20,)
