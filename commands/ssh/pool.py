"""The connection pool: per event loop, one shared connection per host and per chain of bastions, opened once
for everyone who asks at the same time, bounded by ``ssh.max_connections``; a bastion lingers for the next host."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import asyncssh

from commands.errors import ProofbotError
from commands.inventory import Hop, Host
from commands.ssh.channels import HostConnection, Shared
from commands.ssh.opening import close, open_counted, open_hop

if TYPE_CHECKING:
    from commands.ssh.ahead import Ahead

BASTION_LINGER_S = 1.0  # an unused bastion connection waits this long for the next host before closing


class Registry:
    """Per event loop: the connection each host and each bastion chain shares, and how many are open.

    ``open`` counts host connections (``ssh.max_connections``); a bastion connection is one per
    chain of hops, so never more than the inventory names, and it must never wait behind the
    hosts that need it. ``startups`` bounds the handshakes in flight per sshd (``max_startups``).
    """

    def __init__(self) -> None:
        self.current: dict[str, Shared] = {}
        self.opening: dict[str, asyncio.Lock] = {}
        self.failed: dict[str, tuple[int, ProofbotError, float]] = {}
        self.attempts: dict[str, int] = {}
        self.open = 0
        self.slots = asyncio.Condition()
        self.startups: dict[str, asyncio.Semaphore] = {}
        self.lingering: set[asyncio.Task[None]] = set()
        self.ahead: dict[str, Ahead] = {}


registries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Registry] = weakref.WeakKeyDictionary()


def open_connections() -> int:
    """SSH connections open now in this event loop (all hosts)."""
    registry = registries.get(asyncio.get_running_loop())
    return registry.open if registry else 0


def host_key(host: Host) -> str:
    return host.model_dump_json(include={"name", "address", "port", "ssh"})


@asynccontextmanager
async def connected(registry: Registry, host: Host) -> AsyncIterator[HostConnection]:
    async with through(registry, host.ssh.jump) as tunnel:
        key = host_key(host)
        shared = await acquire(registry, key, host.ssh.max_sessions,
                                lambda: open_counted(registry, host, tunnel))
        try:
            yield HostConnection(host, shared)
        finally:
            await release(registry, key, shared, counted=True)


@asynccontextmanager
async def through(registry: Registry, hops: tuple[Hop, ...]
                   ) -> AsyncIterator[asyncssh.SSHClientConnection | None]:
    """The shared connection to the last of hops (each reached through the ones before), or None."""
    if not hops:
        yield None
        return
    async with through(registry, hops[:-1]) as tunnel:
        key = chain_key(hops)
        # A bastion that failed is not tried again for connect_timeout_s: a fleet's hosts all get
        # that one error (said once, naming the bastion), not one attempt each.
        shared = await acquire(registry, key, hops[-1].ssh.max_sessions,
                                lambda: open_hop(registry, hops, tunnel), remember_s=hops[-1].ssh.connect_timeout_s)
        try:
            yield shared.conn
        finally:
            if shared.users == 1 and shared.reusable():
                # The last host behind it is done: kept a moment for the next host of the same run
                # (a fleet one host at a time, a rolling restart), then closed.
                shared.users -= 1
                registry.lingering.add(asyncio.create_task(linger(registry, key, shared)))
            else:
                await release(registry, key, shared, counted=False)


def chain_key(hops: tuple[Hop, ...]) -> str:
    """Hops that log in the same way share one connection, whichever hosts they lead to."""
    not_login = {"jump", "connect_timeout_s", "command_timeout_s", "max_connections", "max_startups", "max_sessions"}
    return "jump " + " ".join(f"{hop.ssh.model_dump_json(exclude=not_login)}@{hop.address}:{hop.port}" for hop in hops)


async def acquire(registry: Registry, key: str, max_sessions: int,
                   opener: Callable[[], Awaitable[asyncssh.SSHClientConnection]], remember_s: float = 0) -> Shared:
    seen_attempts = registry.attempts.get(key, 0)
    # One open per key at a time: whoever waited here shares what the first opened, or its failure.
    async with registry.opening.setdefault(key, asyncio.Lock()):
        shared = registry.current.get(key)
        if shared is None or not shared.reusable():
            failed = registry.failed.get(key)
            if failed and (failed[0] > seen_attempts or time.monotonic() - failed[2] < remember_s):
                raise type(failed[1])(failed[1].message, hint=failed[1].hint)
            registry.attempts[key] = attempt = registry.attempts.get(key, 0) + 1
            try:
                shared = Shared(await opener(), max_sessions)
            except ProofbotError as exc:
                registry.failed[key] = (attempt, exc, time.monotonic())
                raise
            registry.failed.pop(key, None)
            registry.current[key] = shared
        shared.users += 1
        return shared


async def release(registry: Registry, key: str, shared: Shared, *, counted: bool) -> None:
    shared.users -= 1
    if shared.users == 0:
        if registry.current.get(key) is shared:
            del registry.current[key]
        await close(shared.conn)
        if counted:
            async with registry.slots:
                registry.open -= 1
                registry.slots.notify_all()


async def linger(registry: Registry, key: str, shared: Shared) -> None:
    """Close an unused bastion connection after BASTION_LINGER_S, unless a host took it meanwhile."""
    try:
        await asyncio.sleep(BASTION_LINGER_S)
    finally:
        registry.lingering.discard(asyncio.current_task())
        if shared.users == 0:
            if registry.current.get(key) is shared:
                del registry.current[key]
            shared.conn.close()  # not awaited: this may run as the event loop shuts down

