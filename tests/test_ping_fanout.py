"""Tier 1: ``ping`` over many hosts uses the fleet's bounded fan-out: never more than ``fleet.max_parallel`` at once."""

from __future__ import annotations

import pytest

import commands.ping
from bot.demo.host import DemoHost
from commands.findings import Finding
from commands.inventory import Host, parse_inventory
from commands.ping import ping_all
from tests.fleet_rig import fleet_document, fleet_entry


async def test_ping_keeps_to_fleet_max_parallel(clean_host: DemoHost, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [f"ct{n}" for n in range(140, 147)]
    inventory = parse_inventory(fleet_document({name: fleet_entry(clean_host) for name in names}, clean_host,
                                               max_parallel=2), "inventory.yml")
    real = commands.ping.ping
    in_flight: list[int] = [0]
    most = [0]

    async def counted(host: Host) -> Finding:  # the real ping, its overlap counted
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        try:
            return await real(host)
        finally:
            in_flight[0] -= 1

    monkeypatch.setattr(commands.ping, "ping", counted)
    findings = await ping_all(inventory.targets(["gpu-west"]), inventory.fleet)
    assert [finding.status for finding in findings] == ["pass"] * len(names), [f.summary for f in findings]
    assert most[0] == 2
