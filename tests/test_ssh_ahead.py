"""Tier 1: a connection opened ahead (``connect_ahead``) is the one the operation uses, or its error.

The CLI starts the SSH handshake as soon as it knows its hosts, so the login runs while the
rest of the command loads. That must never cost a second login, a second attempt at a host
that failed, a connection left open, or a login at a host whose request is refused.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.demo.host import DemoHost
from commands.errors import ProofbotError
from commands.ssh import ahead as ssh_ahead
from commands.ssh import connect, connect_ahead, open_connections
from commands.ssh import pool as ssh_pool
from tests.conftest import run_cli, write_inventory
from tests.lab.waits import until
from tests.test_ssh import host_of


async def test_a_connection_opened_ahead_is_taken_over_with_one_login(clean_host: DemoHost) -> None:
    host = host_of(clean_host)
    before = clean_host.logins.total
    connect_ahead([host])
    await until("the login ahead", lambda: clean_host.logins.total == before + 1)
    async with connect(host) as conn:
        results = await conn.run_batch([["true"]])
    assert [r.exit_status for r in results] == [0]
    assert clean_host.logins.total == before + 1  # the operation used the login made ahead
    assert open_connections() == 0  # closed when the operation left, not held for AHEAD_HOLD_S
    await until("the server to see the connection closed", lambda: clean_host.logins.open == 0)


async def test_an_operation_waits_for_the_handshake_ahead_instead_of_starting_another(
        clean_host: DemoHost) -> None:
    host = host_of(clean_host)
    before = clean_host.logins.total
    connect_ahead([host])
    async with connect(host) as conn:  # asked at once: the handshake ahead is still in flight
        await conn.run_batch([["true"]])
    assert clean_host.logins.total == before + 1


async def test_a_failure_ahead_is_raised_by_the_operation_without_a_second_attempt(clean_host: DemoHost) -> None:
    attempts = 0

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal attempts
        attempts += 1
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        host = host_of(clean_host).model_copy(update={"port": port})  # an sshd that hangs up at once
        connect_ahead([host])
        await until("the attempt ahead to fail", lambda: attempts == 1 and all(
            ahead.settled.is_set() for ahead in ssh_pool.registries[asyncio.get_running_loop()].ahead.values()))
        with pytest.raises(ProofbotError) as raised:
            async with connect(host):
                pass
        assert attempts == 1
        assert clean_host.name in str(raised.value) and str(port) in str(raised.value)
    finally:
        server.close()
        await server.wait_closed()


async def test_an_operation_cancelled_while_the_handshake_ahead_runs_lets_its_connection_go(
        clean_host: DemoHost) -> None:
    """A fleet host's deadline can end the operation before the login ahead is done: the connection
    must not then stay open (holding an ssh.max_connections slot) for AHEAD_HOLD_S."""
    host = host_of(clean_host)
    before = clean_host.logins.total
    connect_ahead([host])
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.001):
            async with connect(host):
                pass
    await until("the login ahead to happen and end", lambda: clean_host.logins.total == before + 1
                and open_connections() == 0 and clean_host.logins.open == 0, timeout_s=10)


async def test_a_connection_nobody_takes_is_closed(clean_host: DemoHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ssh_ahead, "AHEAD_HOLD_S", 0.3)
    before = clean_host.logins.total
    connect_ahead([host_of(clean_host)])
    await until("the login ahead", lambda: clean_host.logins.total == before + 1)
    await until("the unused connection to close", lambda: open_connections() == 0 and clean_host.logins.open == 0)


async def test_the_cli_logs_in_once_and_not_at_all_for_a_refused_request(clean_host: DemoHost,
                                                                          tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", clean_host.inventory())
    db = tmp_path / "audit.db"
    before = clean_host.logins.total
    refused = await run_cli("verify", clean_host.name, "--backup", "no-such-backup",
                            "--inventory", str(inventory), "--db", str(db))
    assert refused.code == 2, refused.stderr
    assert "no-such-backup" in refused.stderr
    assert clean_host.logins.total == before  # refused before any host saw a login

    passed = await run_cli("verify", clean_host.name, "--inventory", str(inventory), "--db", str(db))
    assert passed.code == 0, passed.stdout + passed.stderr
    assert clean_host.logins.total == before + 1
