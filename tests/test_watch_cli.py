"""Tier 1: ``proofbot watch --once`` from cron or CI: every watched target verified once over loopback SSH,
a line of counts each, and verify's exit codes; an inventory without entries is a usage error."""

from __future__ import annotations

import re
from pathlib import Path

from bot.demo.host import DemoHost
from tests.conftest import run_cli
from tests.watch_rig import watch_inventory


async def test_once_exits_with_the_worst_targets_verify_code(seeded_host: DemoHost, clean_host: DemoHost,
                                                             tmp_path: Path) -> None:
    inventory = watch_inventory(tmp_path, {"broken": [("ct129", seeded_host)], "fine": [("ct130", clean_host),
                                                                                      ("ct131", clean_host)]}, [
        {"target": "fine", "every": "5m", "channel": "C0WATCH"},
        {"target": "broken", "every": "1h", "channel": "C0WATCH"}])
    where = ["--inventory", inventory.path, "--db", str(tmp_path / "a.db")]
    both = await run_cli("watch", "--once", *where)
    assert both.code == 1, both.stderr
    lines = both.stdout.splitlines()
    assert [re.sub(r"^\S+ \S+ ", "", line) for line in lines] == ["watch fine: 2 pass", "watch broken: 1 fail"]

    fine_only = watch_inventory(tmp_path, {"fine": [("ct130", clean_host)]}, [
        {"target": "fine", "every": "5m", "channel": "C0WATCH"}])
    assert (await run_cli("watch", "--once", "--inventory", fine_only.path, "--db", str(tmp_path / "a.db"))).code == 0


async def test_an_inventory_without_watch_entries_is_a_usage_error(clean_host: DemoHost, tmp_path: Path) -> None:
    inventory = watch_inventory(tmp_path, {"fine": [("ct130", clean_host)]}, [])
    run = await run_cli("watch", "--once", "--inventory", inventory.path, "--db", str(tmp_path / "a.db"))
    assert run.code == 2 and f"{inventory.path} has no watch entries" in run.stderr
    assert "watch: [{target: all, every: 5m, channel: C0123ABCD}]" in run.stderr


async def test_once_from_cron_alerts_on_the_second_failing_run_and_then_says_nothing_new(
        seeded_host: DemoHost, tmp_path: Path) -> None:
    inventory = watch_inventory(tmp_path, {"broken": [("ct129", seeded_host)]}, [
        {"target": "broken", "every": "5m", "channel": "C0WATCH", "after": 2}])
    where = ["--inventory", inventory.path, "--db", str(tmp_path / "a.db")]
    said = []
    for _ in range(3):  # three cron runs, each a new process: the state is read back from the audit log
        run = await run_cli("watch", "--once", *where)
        assert run.code == 1, run.stderr
        said.append([line for line in run.stdout.splitlines() if not re.match(r"^\S+ \S+ watch broken: ", line)])
    assert said[0] == [] and said[2] == []
    assert said[1][0] == "watch broken: 1 host now failing"
    assert re.fullmatch(r"ct129 now failing since \S+ \S+ UTC: \S+.*", said[1][1]), said[1]
    trail = await run_cli("audit", "ct129", "--json", "--limit", "10", *where)
    assert trail.code == 0 and trail.stdout.count('"operation": "verify"') == 3  # each run's verify, once
