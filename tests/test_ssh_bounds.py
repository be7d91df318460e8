"""Tier 1: SSH connections shared per host and bounded overall, counted by the lab host's own SSH server."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.demo.host import DemoHost
from commands.errors import ConnectionLost, InventoryError
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.ssh import connect, connect_ahead, open_connections
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until


def fleet(lab: DemoHost, names: list[str], **ssh: Any) -> Inventory:
    """Several inventory hosts that are all the lab host: each name is its own host to proofbot."""
    document = lab.inventory()
    entry = document["hosts"].pop(lab.name)
    document["hosts"] = {name: copy.deepcopy(entry) for name in names}
    document["ssh"].update(ssh)
    return parse_inventory(yaml.safe_dump(document), "fleet.yml")


async def test_overlapping_verifies_of_one_host_log_in_once(clean_host: DemoHost, tmp_path: Path) -> None:
    host = fleet(clean_host, ["ct130"]).host("ct130")
    before = clean_host.logins.total
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        results = await asyncio.gather(*(verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(),
                                                audit=audit) for _ in range(4)))
    finally:
        audit.close()
    assert [r.verdict for r in results] == ["pass"] * 4, [[f.to_json() for f in r.checks] for r in results]
    assert [r.stats["exec_round_trips"] for r in results] == [1] * 4  # each counts its own round trip
    assert clean_host.logins.total - before == 1
    assert open_connections() == 0  # closed when the last verify left


async def test_a_global_bound_of_two_holds_across_five_hosts(clean_host: DemoHost) -> None:
    inventory = fleet(clean_host, [f"h{i}" for i in range(5)], max_connections=2)
    before = clean_host.logins.total
    clean_host.logins.peak = clean_host.logins.open
    most = 0

    async def hold(name: str) -> str:
        nonlocal most
        async with connect(inventory.host(name)) as conn:
            most = max(most, open_connections())
            return (await conn.run(["sh", "-c", f"sleep 0.3; echo {name}"])).text.strip()

    said = await asyncio.gather(*(hold(name) for name in inventory.hosts))
    assert said == list(inventory.hosts)
    assert clean_host.logins.total - before == 5
    assert clean_host.logins.peak == 2 and most == 2


async def test_connections_opened_ahead_keep_the_global_bound_and_every_host_is_reached(
        clean_host: DemoHost) -> None:
    """A CLI fleet opens its first hosts' connections ahead: with max_connections 2 of 5, the ones
    waiting for a slot open as the operations before them leave, none twice, never more than 2."""
    inventory = fleet(clean_host, [f"h{i}" for i in range(5)], max_connections=2)
    hosts = [inventory.host(name) for name in inventory.hosts]
    before = clean_host.logins.total
    clean_host.logins.peak = clean_host.logins.open
    connect_ahead(hosts)

    async def use(name: str) -> str:
        async with connect(inventory.host(name)) as conn:
            return (await conn.run(["sh", "-c", f"sleep 0.2; echo {name}"])).text.strip()

    said = await asyncio.gather(*(use(name) for name in inventory.hosts))
    assert said == list(inventory.hosts)
    assert clean_host.logins.total - before == 5
    assert clean_host.logins.peak == 2
    assert open_connections() == 0


async def test_a_dropped_connection_is_not_handed_out_again(clean_host: DemoHost, tmp_path: Path) -> None:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{proxy.port} {clean_host.known_hosts.read_text().split(' ', 1)[1]}")
        document = clean_host.inventory()
        document["hosts"][clean_host.name]["port"] = proxy.port
        document["ssh"]["known_hosts"] = str(known)
        host = parse_inventory(yaml.safe_dump(document), "t.yml").host(clean_host.name)
        before = clean_host.logins.total
        async with connect(host) as first:
            proxy.reset()  # RST on the open connection: it drops under the operation using it
            await until("the host saw the login end", lambda: clean_host.logins.open == 0)
            with pytest.raises(ConnectionLost, match="connection lost"):
                await first.run(["true"])
            async with connect(host) as second:  # the first is still held, but dropped: a new login
                assert (await second.run(["echo", "fresh"])).text.strip() == "fresh"
        assert clean_host.logins.total - before == 2


def test_max_connections_is_global_only(clean_host: DemoHost) -> None:
    document = clean_host.inventory()
    document["hosts"][clean_host.name]["ssh"] = {"max_connections": 4}
    with pytest.raises(InventoryError, match=r"hosts\.ct130\.ssh\.max_connections: a bound on the whole bot"):
        parse_inventory(yaml.safe_dump(document), "t.yml")
    document["hosts"][clean_host.name].pop("ssh")
    document["ssh"]["max_connections"] = 0
    with pytest.raises(InventoryError, match=r"t\.yml:\d+: ssh\.max_connections: Input should be greater than"):
        parse_inventory(yaml.safe_dump(document), "t.yml")
