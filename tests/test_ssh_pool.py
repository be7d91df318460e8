"""Tier 1: warm SSH connections (``warm_connections``, as ``serve`` runs): a second verify logs in no more, an idle
connection closes after ``ssh.idle_close_s``, ``ssh.max_connections`` holds with idle ones closed least recently
used first, a pooled connection that died is replaced (a read sent again once, never a restart's command), and a
host key that changed while a connection was pooled is refused on the next login. Logins are counted by the lab
host's own SSH server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import yaml

from bot.demo.host import DemoHost
from commands.errors import ConnectionLost, HostKeyNotVerified, InventoryError
from commands.inventory import Host, parse_inventory
from commands.operation import OperationResult, Origin
from commands.ssh import connect, idle_connections, open_connections, warm_connections
from commands.ssh import pool as ssh_pool
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from commands.vocabulary import CheckStatus, Verdict
from tests.conftest import via_port
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.test_ssh_bounds import fleet


@pytest.fixture
def audit(tmp_path: Path) -> Iterator[AuditStore]:
    store = AuditStore.open(tmp_path / "audit.db")
    yield store
    store.close()


@pytest.fixture
async def warm(clean_host: DemoHost) -> AsyncIterator[None]:
    """The pool as ``serve`` runs it; on leaving, every idle connection is closed (the host sees them go)."""
    async with warm_connections():
        yield
    assert idle_connections() == 0 and open_connections() == 0
    await until("the host saw every pooled connection close", lambda: clean_host.logins.open == 0)


async def verified(host: Host, audit: AuditStore, *, but: tuple[str, ...] = ()) -> OperationResult:
    """A verify of host whose every check passes (except those named in ``but``, which must not)."""
    result = await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
    assert {f.name for f in result.checks if f.status != CheckStatus.PASS} == set(but), [
        f.to_json() for f in result.checks if f.status != CheckStatus.PASS]
    return result


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proxied(lab: DemoHost, proxy: DelayProxy, tmp_path: Path, *, host_side_only: bool = False, **ssh: Any) -> Host:
    document = via_port(lab, proxy.port, tmp_path)
    if host_side_only:  # no probe; health asked of a closed loopback port: refused at once, no socket left open
        document["hosts"][lab.name]["service"].pop("probe", None)
        document["hosts"][lab.name]["service"]["health_url"] = f"http://127.0.0.1:{closed_port()}/health"
    document["ssh"].update(ssh)
    return parse_inventory(yaml.safe_dump(document), "t.yml").host(lab.name)


async def test_a_second_verify_of_a_warm_host_logs_in_no_more(clean_host: DemoHost, warm: None,
                                                             audit: AuditStore) -> None:
    host = fleet(clean_host, ["ct130"]).host("ct130")
    before = clean_host.logins.total
    await verified(host, audit)
    assert idle_connections() == 1 and clean_host.logins.open == 1  # kept open, idle, after the verify
    second = await verified(host, audit)
    assert clean_host.logins.total - before == 1  # the second verify: no handshake
    assert second.stats["exec_round_trips"] == 1


async def test_an_idle_connection_closes_after_idle_close_s(clean_host: DemoHost, warm: None,
                                                           audit: AuditStore) -> None:
    host = fleet(clean_host, ["ct130"], idle_close_s=0.5).host("ct130")
    await verified(host, audit)
    assert idle_connections() == 1 and clean_host.logins.open == 1
    await until("the idle connection closed", lambda: idle_connections() == 0 and open_connections() == 0)
    await until("the host saw it close", lambda: clean_host.logins.open == 0)


async def test_idle_close_s_zero_closes_at_once_as_the_cli_does(clean_host: DemoHost, warm: None,
                                                               audit: AuditStore) -> None:
    host = fleet(clean_host, ["ct130"], idle_close_s=0).host("ct130")
    await verified(host, audit)
    assert idle_connections() == 0 and open_connections() == 0


async def test_max_connections_closes_the_least_recently_used_idle_one(clean_host: DemoHost, warm: None) -> None:
    inventory = fleet(clean_host, ["h0", "h1", "h2"], max_connections=2)
    hosts = {name: inventory.host(name) for name in inventory.hosts}
    clean_host.logins.peak = clean_host.logins.open

    async def use(name: str) -> None:
        async with connect(hosts[name]) as conn:
            assert (await conn.run(["echo", name])).text.strip() == name

    before = clean_host.logins.total
    for name in ("h0", "h1", "h0", "h2"):  # h1 is the least recently used when h2 needs a slot
        await use(name)
    assert clean_host.logins.total - before == 3 and clean_host.logins.peak == 2
    registry = ssh_pool.registries[asyncio.get_running_loop()]
    assert sorted(ssh_pool.host_key(hosts[name]) for name in ("h0", "h2")) == sorted(registry.idle)
    await use("h0")
    assert clean_host.logins.total - before == 3  # h0 stayed warm
    await use("h1")
    assert clean_host.logins.total - before == 4 and clean_host.logins.peak == 2


async def test_a_host_waits_for_a_slot_held_by_a_running_operation_not_an_idle_one(clean_host: DemoHost,
                                                                                  warm: None) -> None:
    inventory = fleet(clean_host, ["h0", "h1"], max_connections=1)
    async with connect(inventory.host("h0")) as conn:
        second = asyncio.ensure_future(_echo(inventory.host("h1")))
        await asyncio.sleep(0.2)
        assert not second.done()  # h0 is in use: never closed under its operation
        assert (await conn.run(["echo", "h0"])).text.strip() == "h0"
    assert await second == "h1"


async def _echo(host: Host) -> str:
    async with connect(host) as conn:
        return (await conn.run(["echo", host.name])).text.strip()


async def test_a_peer_that_hung_up_while_pooled_is_logged_in_again(clean_host: DemoHost, warm: None,
                                                                   audit: AuditStore, tmp_path: Path) -> None:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        host = proxied(clean_host, proxy, tmp_path)
        await verified(host, audit)
        proxy.reset()  # the connection dies while idle in the pool
        await until("the pool dropped it", lambda: idle_connections() == 0)
        second = await verified(host, audit)
        assert proxy.accepted == 2 and second.stats["exec_round_trips"] == 1


async def test_a_read_on_a_pooled_link_found_dead_is_sent_again_once(clean_host: DemoHost, warm: None,
                                                                     audit: AuditStore, tmp_path: Path) -> None:
    """The link goes silent (no RST: the pool cannot know) while pooled: the verify's batch is lost when
    keepalive gives up, and is sent again over a new login; the verdict is the host's real one."""
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        # Host-side checks only: an HTTP check's channel held by the dead link would reach the lab host after
        # restore() and leave its forwarded socket open in this process (the lab's artifact, not proofbot's).
        host = proxied(clean_host, proxy, tmp_path, host_side_only=True, keepalive_s=0.2)
        await verified(host, audit, but=("health",))
        proxy.blackhole()
        second = asyncio.ensure_future(verified(host, audit, but=("health",)))
        await until("the new login was attempted", lambda: proxy.accepted == 2, 15)
        proxy.restore()
        result = await second
        assert result.stats["exec_round_trips"] == 2  # the lost one, and the one sent again


async def test_a_command_on_a_pooled_link_found_dead_is_never_sent_again(clean_host: DemoHost, warm: None,
                                                                         tmp_path: Path) -> None:
    """What a restore or a restart runs (``connect`` without ``idempotent``) fails with the link: no new login."""
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        host = proxied(clean_host, proxy, tmp_path, keepalive_s=0.2)
        assert await _echo(host) == host.name
        proxy.blackhole()
        with pytest.raises(ConnectionLost):
            async with connect(host) as conn:
                await conn.run(["touch", str(tmp_path / "ran")])
        assert proxy.accepted == 1
        proxy.restore()


async def test_a_host_key_changed_while_pooled_is_refused_at_the_next_login(clean_host: DemoHost, warm: None,
                                                                            audit: AuditStore,
                                                                            tmp_path: Path) -> None:
    impostor = await asyncssh.listen("127.0.0.1", 0, server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")])
    try:
        async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
            host = proxied(clean_host, proxy, tmp_path)
            await verified(host, audit)
            again = await verified(host, audit)  # pooled: no login, so nothing to judge a key by
            assert proxy.accepted == 1 and again.verdict == Verdict.PASS
            proxy.target = ("127.0.0.1", impostor.sockets[0].getsockname()[1])  # the host now shows another key
            proxy.reset()
            refused = await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
            assert proxy.accepted == 2
            assert refused.verdict != Verdict.PASS
            assert "host key" in refused.checks[0].summary.lower(), refused.checks[0].to_json()
            with pytest.raises(HostKeyNotVerified):
                async with connect(host):
                    pass
    finally:
        impostor.close()
        await impostor.wait_closed()


def test_pool_settings_are_checked_at_their_line(clean_host: DemoHost) -> None:
    document = clean_host.inventory()
    document["ssh"]["idle_close_s"] = -1
    with pytest.raises(InventoryError, match=r"t\.yml:\d+: ssh\.idle_close_s: Input should be greater than or equal"):
        parse_inventory(yaml.safe_dump(document), "t.yml")
    document["ssh"]["idle_close_s"] = 60
    document["hosts"][clean_host.name]["ssh"] = {"keepalive_s": 0}
    with pytest.raises(InventoryError, match=r"t\.yml:\d+: hosts\.ct130\.ssh\.keepalive_s: Input should be greater"):
        parse_inventory(yaml.safe_dump(document), "t.yml")
