"""Tier 1: a fleet verify over loopback hosts: the bounded runner, the per-host deadline, grouping, the audit links."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.demo.host import DemoHost
from commands.fleet import group_outcomes, run_bounded
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan
from commands.verify.fleet import verify_fleet
from tests.fleet_rig import fleet_document, fleet_entry, proxied_known_hosts
from tests.lab.proxy import DelayProxy


async def test_one_black_holed_host_times_out_alone_and_identical_hosts_group(
        seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> None:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        port = proxy.port
        known = proxied_known_hosts(clean_host, port, tmp_path / "known_hosts")
        proxy.blackhole()
        hosts = {"ct129": fleet_entry(seeded_host), "ct130": fleet_entry(clean_host),
                 "ct131": fleet_entry(clean_host, port, known), "ct132": fleet_entry(seeded_host),
                 "ct133": fleet_entry(clean_host)}
        inventory = parse_inventory(fleet_document(hosts, clean_host, max_parallel=2, host_deadline_s=4),
                                    "inv.yml")
        audit = AuditStore.open(tmp_path / "a.db")
        finished: list[str] = []

        async def done(result: Any) -> None:
            finished.append(result.host)

        try:
            plans = [VerifyPlan.for_host(host, None) for host in inventory.targets(["gpu-west"])]
            fleet = await verify_fleet(plans, target="gpu-west", origin=Origin.local_user(), audit=audit,
                                       fleet=inventory.fleet, on_host_done=done)
            events = await audit.read(lambda db: db.execute(
                "SELECT operation_id, kind, host, details FROM events ORDER BY id").fetchall())
        finally:
            audit.close()

    assert [r.host for r in fleet.results] == ["ct129", "ct130", "ct131", "ct132", "ct133"]
    assert fleet.verdict == "fail" and dict(fleet.counts()) == {"fail": 2, "pass": 2, "error": 1}
    assert finished[-1] == "ct131" and sorted(finished) == sorted(r.host for r in fleet.results)
    timed_out = fleet.results[2]
    assert timed_out.verdict == "error"
    assert "timed out after 4 s" in timed_out.checks[0].summary
    groups = group_outcomes(fleet.results)
    assert [(g.outcome, g.hosts) for g in groups] == [
        ("fail", ("ct129", "ct132")), ("error", ("ct131",)), ("pass", ("ct130", "ct133"))]
    assert {name for name, status, _ in groups[0].signature} == {"file:spec_info.py", "extra-files", "cmdline"}
    fleet_events = [e for e in events if e[0] == fleet.operation_id]
    assert [e[1] for e in fleet_events] == ["requested", "finished"]
    linked = [e for e in events if e[1] == "requested" and fleet.operation_id in e[3] and e[0] != fleet.operation_id]
    assert sorted(e[2] for e in linked) == ["ct129", "ct130", "ct131", "ct132", "ct133"]


async def test_the_runner_never_runs_more_than_the_bound_and_keeps_the_order() -> None:
    running, peak = 0, 0

    async def work(item: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01 * (item % 3))
        running -= 1
        return item * 10

    assert await run_bounded(list(range(40)), work, max_parallel=7) == [i * 10 for i in range(40)]
    assert peak == 7
