"""Tier 1: the watch on simulated time over 100 inventory hosts on loopback lab hosts, each real verify over
SSH: a steady fleet says nothing, one patched file is one alert after ``after`` runs and one recovery after
the restore, a flap says nothing, proofbot's own lock says nothing, quiet hours give one digest."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import pytest_asyncio

from bot.demo.host import ORIGINAL_FILES, PATCHED_SPEC_INFO, DemoHost, demo_host
from commands.fleet.grouping import signature_of
from commands.inventory import Inventory
from commands.store.chain import verify_chain
from commands.store.db import AuditStore
from commands.store.locks import acquire, holder_of, release
from commands.verify.rerun import not_passing
from commands.vocabulary import Change, CheckStatus, EventKind, Operation, Verdict
from tests.watch_rig import watch_into_slack, watch_inventory

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # 13:00 in Berlin
BROKEN = [f"ct{n}" for n in range(200, 220)]  # 20 names of the one host the tests patch


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def drifting_host() -> AsyncIterator[DemoHost]:
    """A passing loopback host of this module's own: the tests patch its file and put it back."""
    async with demo_host("ct200", patched=False, extra_file=False, flags=["--speculative-algorithm", "NEXTN"]) as host:
        yield host


@pytest.fixture
def inventory(tmp_path: Path, drifting_host: DemoHost, clean_host: DemoHost) -> Inventory:
    steady = [(f"ct{n}", clean_host) for n in range(300, 380)]  # 100 hosts in all, as issue 27 asks
    return watch_inventory(tmp_path, {"gpu": [(name, drifting_host) for name in BROKEN] + steady}, [
        {"target": "gpu", "every": "5m", "channel": "C0WATCH", "jitter": "30s",
         "quiet": "22:00-22:15 Europe/Berlin"}])


def _patch(host: DemoHost, patched: bool) -> None:
    (host.live_dir / "spec_info.py").write_text(PATCHED_SPEC_INFO if patched else ORIGINAL_FILES["spec_info.py"])


def _kinds(db: Path) -> Counter[str]:
    with closing(sqlite3.connect(db)) as conn:
        return Counter(kind for (kind,) in conn.execute("SELECT kind FROM events"))


async def test_a_steady_fleet_says_nothing(inventory: Inventory, tmp_path: Path, drifting_host: DemoHost) -> None:
    _patch(drifting_host, False)
    posted, runs = await watch_into_slack(inventory, tmp_path, START, 6, lambda _: None)
    assert posted.slack == [] and all(len(run.results) == 100 for run in runs)
    assert _kinds(tmp_path / "audit.db") == {EventKind.WATCH_RUN: 6}  # the log grows with changes, not time


async def test_a_patched_file_is_one_alert_after_two_runs_then_one_recovery(
        inventory: Inventory, tmp_path: Path, drifting_host: DemoHost) -> None:
    _patch(drifting_host, False)
    plan = {1: True, 4: False}  # patched after run 1, restored after run 4
    posted, runs = await watch_into_slack(inventory, tmp_path, START, 7,
                                lambda n: _patch(drifting_host, plan[n]) if n in plan else None)
    assert posted.hosts() == [sorted((name, Change.FAILED) for name in BROKEN),
                              sorted((name, Change.RECOVERED) for name in BROKEN)]
    # in Slack: one alert for the 20 hosts, its evidence in the thread (one group: they fail alike); one recovery
    (alert_text, alert_replies), (recovery_text, recovery_replies) = posted.slack
    assert alert_text == "watch gpu: 20 hosts now failing" and recovery_text == "watch gpu: 20 hosts recovered"
    # Hosts failing alike are one group. Under a loaded CI one host name's health or probe may also time out, which is
    # a different outcome and rightly its own group: the groups must be exactly the distinct ways the hosts read.
    ways = Counter(signature_of(result) for result in posted.fleets[0].results if result.host in BROKEN)
    assert all(("file:spec_info.py", CheckStatus.FAIL) in [(name, status) for name, status, _ in way] for way in ways)
    expected = [f"Group {n} of {len(ways)}: FAIL on {count} host{'s' if count > 1 else ''}"
                for n, (_, count) in enumerate(sorted(ways.items(), key=lambda way: -way[1]), 1)]
    assert alert_replies == expected, f"the hosts read {len(ways)} ways: {list(ways)}"
    # never split by the file check's own text: the ways differ by another check (a timeout under load) or not at all
    assert len({tuple(finding for finding in way if not finding[0].startswith("file:")) for way in ways}) == len(ways)
    # the file was put back under the running process: a pass that warns, its evidence shown too
    assert recovery_replies == ["Group 1 of 1: PASS with warnings on 20 hosts"]
    # the audit log: one compact event per run; the changed hosts' trails only with their change
    kinds = _kinds(tmp_path / "audit.db")
    assert kinds[EventKind.WATCH_RUN] == 7 and kinds[EventKind.WATCH_CHANGE] == 40
    assert kinds[EventKind.REQUESTED] == 2 * (20 + 1)  # each change: 20 hosts' verifies and their fleet's
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        again = await not_passing(store, runs[3].fleet.operation_id)  # the alert's Re-verify button
        assert (await verify_chain(store)).intact
    finally:
        store.close()
    assert sorted(again.hosts) == BROKEN and set(again.backups.values()) == {"pre-ddtree"}
    assert [run.said != [] for run in runs] == [False, False, False, True, False, False, True]
    alert = posted.messages[0][1].changes[0]
    assert posted.messages[0][0] == "C0WATCH" and "file:spec_info.py" in alert.now.causes


async def test_a_flap_says_nothing(inventory: Inventory, tmp_path: Path, drifting_host: DemoHost) -> None:
    _patch(drifting_host, False)
    posted, _ = await watch_into_slack(inventory, tmp_path, START, 6, lambda n: _patch(drifting_host, n % 2 == 0))
    assert posted.slack == []


async def test_a_host_proofbot_holds_says_nothing(inventory: Inventory, tmp_path: Path,
                                                  drifting_host: DemoHost) -> None:
    _patch(drifting_host, False)
    audit = AuditStore.open(tmp_path / "audit.db")
    locks = []

    async def restart_between(n: int) -> None:
        if n == 1:  # proofbot's restore of every broken name begins: locks taken, the file patched meanwhile
            locks.extend([await acquire(audit, name, "op-restart", Operation.RESTART, "U1") for name in BROKEN])
            _patch(drifting_host, True)
        if n == 4:  # it ends: the file is right again, the locks released (ready_timeout_s 30 s is then over)
            _patch(drifting_host, False)
            for lock in locks:
                await release(audit, lock)

    try:
        posted, runs = await watch_into_slack(inventory, tmp_path, START, 6, restart_between)
        assert await holder_of(audit, BROKEN[0]) is None
    finally:
        audit.close()
    assert any(run.verdict == Verdict.FAIL for run in runs)  # the host did fail while held
    assert posted.slack == []


async def test_quiet_hours_hold_the_alert_for_one_digest_at_their_end(
        inventory: Inventory, tmp_path: Path, drifting_host: DemoHost) -> None:
    _patch(drifting_host, False)
    evening = datetime(2026, 12, 1, 20, 50, tzinfo=UTC)  # 21:50 in Berlin; quiet 22:00-22:15
    posted, runs = await watch_into_slack(inventory, tmp_path, evening, 6,
                                          lambda n: _patch(drifting_host, True) if n == 2 else None)
    assert posted.slack == [("watch gpu (held through quiet hours): 20 hosts now failing",
                             ["Group 1 of 1: FAIL on 20 hosts"])]
    digest = posted.messages[0][1]
    assert digest.digest and posted.hosts() == [sorted((name, Change.FAILED) for name in BROKEN)]
    said_at = next(run.at for run in runs if run.said)
    # failing from 22:05, confirmed at 22:10 (quiet); said at 22:15 Berlin, the first run after the quiet hours
    assert [run.said != [] for run in runs] == [False] * 5 + [True] and said_at >= evening + timedelta(minutes=25)
    _patch(drifting_host, False)
