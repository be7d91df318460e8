"""Opening one SSH connection: known_hosts read off the loop, the handshake bounded per sshd (MaxStartups) and by
``connect_timeout_s``, through a bastion's tunnel or not; every failure an error of ``commands.errors``."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import asyncssh

from commands import observe
from commands.awake import awake_timeout
from commands.errors import ProofbotError
from commands.inventory import Hop, Host, SshSettings
from commands.ssh.failures import SSH_FAILURES, At, Step, as_error, through_bastion
from commands.ssh.options import client_options, host_trust

if TYPE_CHECKING:
    from commands.ssh.pool import Registry

KEEPALIVE_COUNT_MAX = 3  # keepalives unanswered before the link is taken for dead (each ssh.keepalive_s apart)


async def open_one(registry: Registry, host: Host,
                   tunnel: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
    """Open host's connection (through tunnel, the connection to its last hop), its key checked."""
    return await _open(registry, host, tunnel, host.ssh.jump)


# sshd counts a connection as a startup until its listener reads the child's "logged in" message, a
# moment after the client sees the login succeed: a bound of exactly MaxStartups drew a drop in 1 run of 3.
STARTUP_MARGIN = 2


def startup_slot(registry: Registry, sshd: str, settings: SshSettings) -> asyncio.Semaphore:
    """At most ``max_startups`` less a margin handshakes in flight to one sshd: past MaxStartups, sshd
    drops at random."""
    return registry.startups.setdefault(sshd, asyncio.Semaphore(max(1, settings.max_startups - STARTUP_MARGIN)))


async def _open(registry: Registry, host: Host | Hop,
                tunnel: asyncssh.SSHClientConnection | None, via: tuple[Hop, ...] = ()
                ) -> asyncssh.SSHClientConnection:
    """Open one SSH connection to host (through tunnel, the connection to via[-1]) with its key checked."""
    settings = host.ssh
    sshd = " ".join(f"{hop.address}:{hop.port}" for hop in (*via, host))
    try:
        # known_hosts is read before a handshake slot is taken: a slot is only held while sshd counts it
        trust = await asyncio.to_thread(host_trust, host)
        async with startup_slot(registry, sshd, settings), client_options(host, time.time(), trust) as options:
            options |= {"keepalive_interval": settings.keepalive_s, "keepalive_count_max": KEEPALIVE_COUNT_MAX}
            # the handshake's deadline counts time this process was awake: a starved loop is not a silent host
            async with awake_timeout(settings.connect_timeout_s):
                conn = await asyncssh.connect(host.address, host.port, tunnel=tunnel or (), **options)
    except SSH_FAILURES as exc:
        error = as_error(exc, At(host, Step.CONNECT, via=via[-1] if via else None,
                                 timeout_s=settings.connect_timeout_s))
        observe.ssh_connected(type(error).__name__)
        raise error from exc
    except ProofbotError as exc:  # refused before a handshake (no trusted key for the host, say)
        observe.ssh_connected(type(exc).__name__)
        raise
    observe.ssh_connected(None)
    return conn


async def open_hop(registry: Registry, hops: tuple[Hop, ...],
                    tunnel: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
    """The connection to hops[-1]; any failure is one ``BastionUnreachable`` naming the bastion."""
    hop = hops[-1]
    try:
        return await _open(registry, hop, tunnel, hops[:-1])
    except ProofbotError as exc:
        raise through_bastion(exc, hops) from exc


async def close(conn: asyncssh.SSHClientConnection) -> None:
    """Close conn, waiting a moment for the far end; a close that fails has nothing left to do."""
    conn.close()
    try:
        await asyncio.wait_for(conn.wait_closed(), timeout=2)
    except (TimeoutError, OSError, asyncssh.Error):
        pass

