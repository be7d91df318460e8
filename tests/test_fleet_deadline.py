"""Tier 1: the fleet-wide deadline. Hosts whose turn never comes (``limits.hosts`` slots held by another fleet, a
slow host ahead of them) are "could not check: fleet deadline of N s reached", never a pass, never left out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from commands.fleet.deadline import fleet_deadline_s
from commands.fleet.run import run_bounded
from commands.inflight import InFlight
from commands.inventory import Limits, parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan
from commands.verify.fleet import verify_fleet

# Never contacted: their turn never comes. Loopback anyway (tests talk only to loopback).
INVENTORY = """
fleet: {max_parallel: 2, host_deadline_s: 1}
hosts:
  ct130: {address: 127.0.0.1, port: 9, service: {manager: systemd, unit: sglang, health_url: "http://127.0.0.1:9/health"}}
  ct131: {address: 127.0.0.1, port: 9, service: {manager: systemd, unit: sglang, health_url: "http://127.0.0.1:9/health"}}
groups:
  gpu-west: [ct130, ct131]
"""


def test_the_deadline_is_the_rounds_each_host_may_take_and_one_more() -> None:
    assert fleet_deadline_s(2, 120, 32) == 240
    assert fleet_deadline_s(64, 120, 32) == 360
    assert fleet_deadline_s(65, 120, 32) == 480
    assert fleet_deadline_s(0, 10, 4) == 20


async def test_items_whose_slot_comes_past_start_by_are_late_never_dropped() -> None:
    release = asyncio.Event()

    async def work(item: int) -> str:
        if item == 0:
            await release.wait()  # a slow host holding the only slot
        return f"done {item}"

    async def late(item: int) -> str:
        release.set()
        return f"late {item}"

    start_by = asyncio.get_running_loop().time() + 0.2
    results = await asyncio.wait_for(run_bounded([0, 1, 2], work, max_parallel=1, start_by=start_by, late=late), 60)
    assert results == ["done 0", "late 1", "late 2"]


async def test_a_fleet_whose_host_slots_another_fleet_holds_ends_by_its_deadline_each_host_could_not_check(
        tmp_path: Path) -> None:
    inventory = parse_inventory(INVENTORY, "inv.yml")
    inflight = InFlight(Limits(hosts=1))
    slots = inflight.host_slots()
    held, release = asyncio.Event(), asyncio.Event()

    async def other_fleet() -> None:  # its host's verify holds the one slot of limits.hosts
        async with slots:
            held.set()
            await release.wait()

    holder = asyncio.create_task(other_fleet())
    await held.wait()
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        plans = [VerifyPlan.for_host(host, None) for host in inventory.targets(["gpu-west"])]
        # Without a fleet deadline this waits for the other fleet for ever: 60 s is the test's own bound.
        fleet = await asyncio.wait_for(verify_fleet(plans, target="gpu-west", origin=Origin.local_user(),
                                                    audit=audit, fleet=inventory.fleet, host_slots=slots), 60)
        events = await audit.read(lambda db: db.execute(
            "SELECT operation_id, kind, host, details FROM events ORDER BY id").fetchall())
    finally:
        release.set()
        await holder
        audit.close()

    assert [result.host for result in fleet.results] == ["ct130", "ct131"]
    assert fleet.verdict == "error" and dict(fleet.counts()) == {"error": 2}
    for result in fleet.results:
        first, *rest = result.checks
        assert first.summary.startswith("could not check: fleet deadline of 2 s reached"), first.summary
        assert all(finding.status == "error" for finding in rest)
    # each host's verify is in the log as any other (/audit HOST lists it), linked to the fleet, finished
    finished = {host: json.loads(details) for _, kind, host, details in events if kind == "finished" and host}
    assert {host: details["verdict"] for host, details in finished.items()} == {"ct130": "error", "ct131": "error"}
    requested = json.loads(next(d for op, kind, _, d in events if op == fleet.operation_id and kind == "requested"))
    assert requested["fleet"]["deadline_s"] == 2
