"""Tier 1: the issue's scenarios over 100 hosts on simulated time, each asserted on what the fake Slack holds. The
hosts' results are recorded (a real verify of each of 100 names costs ~130 CPU-s over the scenarios: the same
scenarios with real verifies over SSH run over 24 names in test_watch_loopback.py); the state machine, the
schedule, the audit writer, proofbot's own locks and the Slack poster are the real ones."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from commands.inventory import Inventory, parse_inventory
from commands.store.db import AuditStore
from commands.store.locks import acquire, release
from commands.vocabulary import Change, Operation, Verdict
from tests.watch_rig import RecordedFleet, watch_into_slack

HOSTS = [f"gpu{n:03d}" for n in range(100)]
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # 13:00 in Berlin


def _inventory(tmp_path: Path, **entry: Any) -> Inventory:
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({
        "hosts": {name: {"address": "127.0.0.1"} for name in HOSTS}, "groups": {"gpu": HOSTS},
        "watch": [{"target": "gpu", "every": "5m", "channel": "C0WATCH", "jitter": "30s", **entry}]}))
    return parse_inventory(path.read_text(), str(path))


async def test_nothing_changes_for_a_week_nothing_is_said(tmp_path: Path) -> None:
    inventory = _inventory(tmp_path, every="1h", jitter="6m")  # hourly: a week is 168 runs of 100 hosts
    posted, runs = await watch_into_slack(inventory, tmp_path, START, 7 * 24, lambda _: None,
                                          RecordedFleet(HOSTS, lambda _: set()))
    assert posted.slack == [] and len(runs) == 168 and all(len(run.results) == 100 for run in runs)


async def test_one_patched_file_is_one_alert_after_two_runs_then_one_recovery(tmp_path: Path) -> None:
    fleet = RecordedFleet(HOSTS, lambda run: {"gpu005"} if 2 <= run < 6 else set())  # restored after run 5
    posted, runs = await watch_into_slack(_inventory(tmp_path), tmp_path, START, 10, lambda _: None, fleet)
    assert posted.slack == [("watch gpu: 1 host now failing", ["Group 1 of 1: FAIL on 1 host"]),
                            ("watch gpu: 1 host recovered", [])]
    assert [index for index, run in enumerate(runs) if run.said] == [3, 7]


async def test_a_host_that_alternates_is_never_said(tmp_path: Path) -> None:
    fleet = RecordedFleet(HOSTS, lambda run: {"gpu042"} if run % 2 else set())
    posted, _ = await watch_into_slack(_inventory(tmp_path), tmp_path, START, 12, lambda _: None, fleet)
    assert posted.slack == []


async def test_a_restart_by_proofbot_during_the_runs_is_not_said(tmp_path: Path) -> None:
    audit = AuditStore.open(tmp_path / "audit.db")  # the watch's own log: proofbot's lock is taken in it
    locks = []

    async def restart(run: int) -> None:
        if run == 1:  # the restart begins: the host fails while it runs (runs 2..4)
            locks.append(await acquire(audit, "gpu007", "op-restart", Operation.RESTART, "U1"))
        if run == 4:
            await release(audit, locks.pop())

    fleet = RecordedFleet(HOSTS, lambda run: {"gpu007"} if 2 <= run <= 4 else set())
    try:
        posted, runs = await watch_into_slack(_inventory(tmp_path), tmp_path, START, 8, restart, fleet)
    finally:
        audit.close()
    assert sum(result.verdict == Verdict.FAIL for run in runs for result in run.results) == 3  # it did fail
    assert posted.slack == []


async def test_quiet_hours_give_one_digest_at_their_end(tmp_path: Path) -> None:
    evening = datetime(2026, 12, 1, 20, 50, tzinfo=UTC)  # 21:50 in Berlin
    # gpu001 fails for the night; gpu002 fails at 22:05 and recovers at 23:00: one line for it in the digest
    fleet = RecordedFleet(HOSTS, lambda run: {"gpu001"} | ({"gpu002"} if 3 <= run < 14 else set()) if run >= 3
                          else set())
    posted, runs = await watch_into_slack(_inventory(tmp_path, quiet="22:00-07:00 Europe/Berlin"), tmp_path,
                                          evening, 12 * 10, lambda _: None, fleet)
    assert [text for text, _ in posted.slack] == [
        "watch gpu (held through quiet hours): 1 host now failing, 1 host recovered"]
    (index,) = [index for index, run in enumerate(runs) if run.said]
    end = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)  # 07:00 in Berlin
    assert runs[index - 1].at < end <= runs[index].at  # the first run after the quiet hours
    (digest,) = runs[index].said
    assert [(change.host, [step.change for step in change.earlier]) for change in digest.changes] == [
        ("gpu001", []), ("gpu002", [Change.FAILED])]


async def test_twenty_hosts_breaking_at_once_are_one_message(tmp_path: Path) -> None:
    broken = set(HOSTS[40:60])
    posted, _ = await watch_into_slack(_inventory(tmp_path), tmp_path, START, 5, lambda _: None,
                                       RecordedFleet(HOSTS, lambda run: broken if run >= 2 else set()))
    assert posted.slack == [("watch gpu: 20 hosts now failing", ["Group 1 of 1: FAIL on 20 hosts"])]
    assert sorted(change.host for _, message in posted.messages for change in message.changes) == sorted(broken)
