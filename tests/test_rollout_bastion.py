"""Tier 1: a rolling restart of hosts behind a bastion logs into the bastion once for the whole run, however long
the gap between two batches (its audit writes and Slack posts on a loaded machine passed the bastion's linger),
and never keeps it past the bound it is given.

Two loopback lab hosts (each its own supervisord) reached through the in-process bastion of tests/test_ssh_jump.py,
which counts its logins.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, demo_host
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.restart.rollout import HostOutcome, RolloutPlan, apply_rollout, request_rollout
from commands.ssh import bastions_kept, connect
from commands.ssh.pool import BASTION_LINGER_S, registry_here
from commands.store import approvals
from commands.store.db import AuditStore
from commands.vocabulary import PlanState
from tests.lab.waits import until
from tests.test_ssh_jump import Bastion, bastion_server

NAMES = ["ct131", "ct132"]


@pytest_asyncio.fixture(scope="module")
async def behind_bastion(tmp_path_factory: Any) -> AsyncIterator[tuple[Inventory, Bastion]]:
    """Both hosts, a group of them, restarted one per batch, each reached only through the bastion."""
    here: Path = tmp_path_factory.mktemp("rollout-bastion")
    async with AsyncExitStack() as stack:
        flags = ["--speculative-algorithm", "NEXTN"]  # the launch flags the inventory expects: a restart is proven
        hosts: list[DemoHost] = [await stack.enter_async_context(demo_host(name, flags=flags)) for name in NAMES]
        bastion = await stack.enter_async_context(bastion_server(hosts[0].client_key.with_name("authorized_keys")))
        known = here / "known_hosts"
        known.write_text("".join(host.known_hosts.read_text() for host in hosts) + bastion.known_hosts_line + "\n")
        document = hosts[0].inventory()
        document["hosts"] = {}
        for host in hosts:
            entry: dict[str, Any] = host.inventory()["hosts"][host.name]
            entry["ssh"] = {"client_keys": [str(host.client_key)], "jump": "bastion"}
            document["hosts"][host.name] = entry
        document["hosts"]["bastion"] = {"address": "127.0.0.1", "port": bastion.port}
        document["ssh"]["known_hosts"] = str(known)
        document["groups"] = {"gpu-west": NAMES}
        document["fleet"] = {"restart_batch": 1}
        yield parse_inventory(yaml.safe_dump(document), "inventory.yml"), bastion


async def test_a_slow_gap_between_batches_of_a_rollout_keeps_the_bastion_login(
        behind_bastion: tuple[Inventory, Bastion], tmp_path: Path) -> None:
    inventory, bastion = behind_bastion
    assert [hop.name for hop in inventory.host(NAMES[1]).ssh.jump] == ["bastion"]
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        shown = await request_rollout(inventory, "gpu-west", origin=Origin.local_user(), audit=audit)
        decided = await approvals.decide(audit, shown.operation_id, "bob@cli", PlanState.APPROVED,
                                         inventory.approvals)
        plan = RolloutPlan.load(inventory, decided)
        await until("the planning's bastion login closed", lambda: bastion.logins.open == 0)
        before = bastion.logins.total

        async def slow_post(outcome: HostOutcome) -> None:  # each host's post, slower than the bastion's linger
            await asyncio.sleep(BASTION_LINGER_S * 1.5)

        result = await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet,
                                     on_host_done=slow_post, poll_interval_s=0.2, settle_s=0.5)
    finally:
        audit.close()
    states = [(o.host, o.state) for o in result.hosts]
    assert states == [(name, "done") for name in NAMES], [o.reason for o in result.hosts]
    assert bastion.logins.total - before == 1, "one bastion login for the whole rollout, kept across the gap"
    await until("the bastion connection closed after the rollout", lambda: bastion.logins.open == 0)


async def test_the_kept_bastion_lingers_and_closes_at_the_runs_bound(
        behind_bastion: tuple[Inventory, Bastion]) -> None:
    """A run stuck past its own bound pins no bastion: once it passes, the unused connection closes as after a run."""
    inventory, bastion = behind_bastion
    await until("no bastion connection open", lambda: bastion.logins.open == 0)
    host = inventory.host(NAMES[0])
    async with bastions_kept([host], at_most_s=BASTION_LINGER_S):
        assert registry_here().kept, "kept from the start of the run"
        async with connect(host) as conn:
            assert (await conn.run(["true"])).exit_status == 0
        await until("the bastion connection closed past the bound, still inside the run",
                    lambda: bastion.logins.open == 0)
        assert not registry_here().kept, "no longer kept past the bound"

