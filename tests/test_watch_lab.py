"""Tier 2: the watch over real OpenSSH hosts (namespace hosts under supervisord), on simulated time: a live file
patched between runs is exactly one message after ``after`` runs, in the entry's channel of the fake Slack, its
evidence in the thread; the host left passing says nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from commands.inventory import parse_inventory
from commands.vocabulary import Verdict
from tests.lab.common import LIVE_FILES, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab
from tests.watch_rig import watch_into_slack


@pytest.fixture(scope="module")
def watch_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct129": Scenario(), "ct130": Scenario()}) as lab:
        yield lab


@pytest.mark.tier2
async def test_a_file_patched_between_runs_is_one_alert_after_two_runs(watch_lab: NetnsLab, tmp_path: Path) -> None:
    document = watch_lab.inventory()
    document["groups"] = {"gpu": ["ct129", "ct130"]}
    document["watch"] = [{"target": "gpu", "every": "5m", "channel": "C0WATCH", "after": 2, "jitter": "0s"}]
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(document))
    inventory = parse_inventory(path.read_text(), str(path))
    live = watch_lab["ct130"].local_path(LIVE_FILES["spec_info.py"])
    original = live.read_text()

    def patch_after_first_run(run: int) -> None:
        if run == 0:  # between the 1st and 2nd runs, on the host's own filesystem
            live.write_text(original + "    DDTREE = auto()  # ddtree patch\n")

    try:
        posted, runs = await watch_into_slack(inventory, tmp_path, datetime(2026, 12, 1, 12, 0, tzinfo=UTC), 5,
                                    patch_after_first_run)
    finally:
        live.write_text(original)
    assert [run.verdict for run in runs] == [Verdict.PASS] + [Verdict.FAIL] * 4
    assert posted.slack == [("watch gpu: 1 host now failing", ["Group 1 of 1: FAIL on 1 host"])]
    assert [run.said != [] for run in runs] == [False, False, True, False, False]  # after 2 failing runs
    (change,) = posted.messages[0][1].changes
    assert change.host == "ct130" and change.now.causes == {"file:spec_info.py"}
