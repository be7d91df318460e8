"""Tier 1: hosts behind a jump host share one connection to it; a bastion that is down is tried once.

The bastion is an in-process asyncssh server on loopback that only forwards (direct-tcpip) to
127.0.0.1 and counts its logins; the hosts behind it are the loopback lab host under several names.
"""

from __future__ import annotations

import asyncio
import copy
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import yaml

from bot.demo.host import DemoHost, Logins, _CommandServer
from commands.errors import BastionUnreachable, HostUnreachable
from commands.fleet import group_outcomes
from commands.inventory import FleetSettings, Inventory, parse_inventory
from commands.operation import Origin
from commands.ssh import connect
from commands.ssh.pool import BASTION_LINGER_S
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from commands.verify.fleet import verify_fleet
from tests.lab.waits import until


@dataclass
class Bastion:
    port: int
    known_hosts_line: str
    logins: Logins
    forwards: list[tuple[str, int]] = field(default_factory=list)


class _BastionServer(_CommandServer):
    """The lab host's login counting, forwarding only to 127.0.0.1, and a record of where it forwarded."""

    def __init__(self, bastion: Bastion) -> None:
        super().__init__(bastion.logins)
        self._bastion = bastion

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        self._bastion.forwards.append((dest_host, dest_port))
        return dest_host == "127.0.0.1"


@asynccontextmanager
async def bastion_server(authorized_keys: Path) -> AsyncIterator[Bastion]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    bastion = Bastion(0, "", Logins())
    server = await asyncssh.listen("127.0.0.1", 0, server_factory=lambda: _BastionServer(bastion),
                                   server_host_keys=[key], authorized_client_keys=str(authorized_keys),
                                   allow_scp=False)
    bastion.port = int(server.sockets[0].getsockname()[1])
    bastion.known_hosts_line = f"[127.0.0.1]:{bastion.port} {key.export_public_key().decode().strip()}"
    try:
        yield bastion
    finally:
        server.close()
        await server.wait_closed()


def behind(lab: DemoHost, names: list[str], bastion_port: int, known_hosts_extra: str, tmp_path: Path,
           **ssh: Any) -> Inventory:
    """The lab host under several names, each reached through the inventory host `bastion`."""
    document = lab.inventory()
    entry = document["hosts"].pop(lab.name)
    document["hosts"] = {name: copy.deepcopy(entry) for name in names}
    document["hosts"]["bastion"] = {"address": "127.0.0.1", "port": bastion_port}
    known = tmp_path / "known_hosts"
    known.write_text(lab.known_hosts.read_text() + known_hosts_extra + "\n")
    document["ssh"].update(known_hosts=str(known), jump="bastion", **ssh)
    return parse_inventory(yaml.safe_dump(document), "behind.yml")


async def verify_all(inventory: Inventory, names: list[str], tmp_path: Path) -> list[Any]:
    audit = AuditStore.open(tmp_path / "audit.db")
    try:
        return await asyncio.gather(*(verify(VerifyPlan.for_host(inventory.host(name), None),
                                             origin=Origin.local_user(), audit=audit) for name in names))
    finally:
        audit.close()


async def test_hosts_behind_a_bastion_share_one_login_to_it(clean_host: DemoHost, tmp_path: Path) -> None:
    names = [f"gpu{i}" for i in range(6)]
    async with bastion_server(clean_host.client_key.with_name("authorized_keys")) as bastion:
        inventory = behind(clean_host, names, bastion.port, bastion.known_hosts_line, tmp_path)
        assert [hop.name for hop in inventory.host("gpu0").ssh.jump] == ["bastion"]
        assert inventory.host("bastion").ssh.jump == ()  # the bastion itself is reached directly
        before = clean_host.logins.total
        results = await verify_all(inventory, names, tmp_path)
        assert [r.verdict for r in results] == ["pass"] * 6, [[f.to_json() for f in r.checks] for r in results]
        assert bastion.logins.total == 1
        assert clean_host.logins.total - before == 6  # each host logged into on its own, through the tunnel
        assert ("127.0.0.1", clean_host.ssh_port) in bastion.forwards
        await until("the bastion connection closed after the last host", lambda: bastion.logins.open == 0)


async def test_the_bastion_connection_lives_until_the_last_host_behind_it_is_done(
        clean_host: DemoHost, tmp_path: Path) -> None:
    async with bastion_server(clean_host.client_key.with_name("authorized_keys")) as bastion:
        inventory = behind(clean_host, ["a", "b"], bastion.port, bastion.known_hosts_line, tmp_path)
        async with connect(inventory.host("a")) as first:
            async with connect(inventory.host("b")) as second:
                assert (await second.run(["echo", "b"])).text.strip() == "b"
            assert bastion.logins.open == 1  # a still rides it
            assert (await first.run(["echo", "a"])).text.strip() == "a"
        await until("the bastion connection closed", lambda: bastion.logins.open == 0)
        async with connect(inventory.host("a")) as again:  # a later operation opens it afresh
            assert (await again.run(["true"])).exit_status == 0
        assert bastion.logins.total == 2


async def test_a_bastion_that_is_down_is_tried_once_and_named_by_every_host(
        clean_host: DemoHost, tmp_path: Path) -> None:
    accepted = 0

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        writer.close()  # a TCP port that answers and hangs up: no SSH there

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    names = [f"gpu{i}" for i in range(5)]
    audit = AuditStore.open(tmp_path / "audit.db")
    try:
        inventory = behind(clean_host, names, port, "", tmp_path)
        before = clean_host.logins.total
        # Two at a time: the hosts of later waves get the bastion's failure too, without a new attempt.
        fleet = await verify_fleet([VerifyPlan.for_host(inventory.host(name), None) for name in names],
                                   target="gpu", origin=Origin.local_user(), audit=audit,
                                   fleet=FleetSettings(max_parallel=2))
    finally:
        audit.close()
        server.close()
        await server.wait_closed()
    results = fleet.results
    assert [r.verdict for r in results] == ["error"] * 5
    (group,) = group_outcomes(results)  # the fleet summary says it once, for all five hosts
    assert group.hosts == tuple(names)
    causes = [r.checks[0].summary for r in results]
    assert all(cause == causes[0] for cause in causes), causes  # one cause, word for word
    assert causes[0].startswith(f"could not check: could not reach the bastion bastion (127.0.0.1:{port}): "), causes
    assert all(f.summary.startswith("not checked: the same cause") for r in results for f in r.checks[1:])
    step = results[0].checks[0].next_step
    assert step is not None
    assert step.advice.startswith(f"check that the bastion answers SSH (bastion (127.0.0.1:{port}))"), step
    assert accepted == 1  # tried once for the whole fleet, not once per host
    assert clean_host.logins.total == before


async def test_a_bastion_that_refuses_the_key_is_an_error_naming_it(clean_host: DemoHost, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    async with bastion_server(clean_host.client_key.with_name("authorized_keys")) as bastion:
        inventory = behind(clean_host, ["gpu0"], bastion.port, f"[127.0.0.1]:{bastion.port} {other}", tmp_path)
        try:
            async with connect(inventory.host("gpu0")):
                raise AssertionError("connected through a bastion whose key is not the known one")
        except BastionUnreachable as exc:
            said = str(exc)
        assert said.startswith(f"could not reach the bastion bastion (127.0.0.1:{bastion.port}): "
                               "host key not verified against "), said
        assert bastion.logins.total == 0


async def test_sessions_on_one_connection_stay_within_max_sessions(clean_host: DemoHost, tmp_path: Path) -> None:
    document = clean_host.inventory()
    document["ssh"]["max_sessions"] = 3
    host = parse_inventory(yaml.safe_dump(document), "t.yml").host(clean_host.name)
    here = tmp_path / "sessions"
    here.mkdir()
    # Each command counts the commands running beside it on the host (its own file included).
    count = f'f=$(mktemp -p {here}); ls {here} | wc -l; sleep 0.2; rm -f "$f"'
    async with connect(host) as conn:
        seen = await asyncio.gather(*(conn.run(["sh", "-c", count]) for _ in range(12)))
    assert all(r.exit_status == 0 for r in seen)
    assert max(int(r.text) for r in seen) <= 3


async def test_a_host_the_bastion_cannot_reach_is_unreachable_naming_the_bastion(
        clean_host: DemoHost, tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on, as the bastion sees it
        closed.bind(("127.0.0.1", 0))
        port = int(closed.getsockname()[1])
    async with bastion_server(clean_host.client_key.with_name("authorized_keys")) as bastion:
        inventory = behind(clean_host, ["gpu0", "gpu1"], bastion.port, bastion.known_hosts_line, tmp_path)
        gone = inventory.host("gpu1").model_copy(update={"port": port})
        async with connect(inventory.host("gpu0")) as conn:
            try:
                async with connect(gone):
                    raise AssertionError("connected to a port nothing listens on")
            except HostUnreachable as exc:
                said = exc
            assert (await conn.run(["true"])).exit_status == 0  # the bastion connection is fine, still shared
    assert not isinstance(said, BastionUnreachable)
    assert str(said).startswith(f"gpu1 (127.0.0.1:{port}): the bastion bastion could not connect to it: "), said
    assert bastion.logins.total == 1


class SlowAfterEachHost:
    """Entered around each host's verify, as serve's host slots are: a step slower than the bastion's linger
    after each host (an audit write on a loaded machine was)."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.sleep(BASTION_LINGER_S * 1.5)


async def one_host_at_a_time(clean_host: DemoHost, count: int, tmp_path: Path,
                             host_slots: SlowAfterEachHost | None = None) -> None:
    """A fleet of ``count`` hosts behind the bastion, verified one at a time: all pass on one bastion login."""
    names = [f"gpu{i}" for i in range(count)]
    async with bastion_server(clean_host.client_key.with_name("authorized_keys")) as bastion:
        inventory = behind(clean_host, names, bastion.port, bastion.known_hosts_line, tmp_path)
        audit = AuditStore.open(tmp_path / "audit.db")
        try:
            fleet = await verify_fleet([VerifyPlan.for_host(inventory.host(name), None) for name in names],
                                       target="gpu", origin=Origin.local_user(), audit=audit,
                                       fleet=FleetSettings(max_parallel=1), host_slots=host_slots)
        finally:
            audit.close()
        assert [r.verdict for r in fleet.results] == ["pass"] * count
        assert bastion.logins.total == 1  # kept between one host and the next, not opened per host
        await until("the bastion connection closed after the run", lambda: bastion.logins.open == 0)


async def test_a_fleet_one_host_at_a_time_logs_into_the_bastion_once(clean_host: DemoHost, tmp_path: Path) -> None:
    await one_host_at_a_time(clean_host, 3, tmp_path)


async def test_a_slow_gap_between_hosts_of_a_fleet_keeps_the_bastion_login(
        clean_host: DemoHost, tmp_path: Path) -> None:
    """The run still has hosts behind the bastion however long the gap between two: its connection is kept, not
    closed after its linger and logged into again (the flake: 2 logins where 1 is expected)."""
    await one_host_at_a_time(clean_host, 2, tmp_path, SlowAfterEachHost())
