"""The connection pool: per event loop, one shared connection per host and per chain of bastions, opened once
for everyone who asks at the same time, bounded by ``ssh.max_connections``; a bastion lingers for the next host,
and under ``warm_connections`` (``serve``) a host's connection stays open, idle, for the next operation."""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import asyncssh

from commands.errors import ProofbotError
from commands.inventory import Hop, Host
from commands.ssh.channels import HostConnection, Shared
from commands.ssh.opening import close, open_hop, open_one

if TYPE_CHECKING:
    from commands.ssh.ahead import Ahead

BASTION_LINGER_S = 1.0  # an unused bastion connection waits this long for the next host before closing


class Registry:
    """Per event loop: the connection each host and each bastion chain shares, and how many are open.

    ``open`` counts host connections (``ssh.max_connections``), idle ones included; a bastion
    connection is one per chain of hops, so never more than the inventory names, and it must never
    wait behind the hosts that need it. ``startups`` bounds the handshakes in flight per sshd
    (``max_startups``). ``idle`` holds the warm host connections nobody uses, least recently used first.
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
        self.warm = 0  # warm_connections() entered and not left: a host connection is kept after use
        self.idle: OrderedDict[str, Shared] = OrderedDict()
        self.closing: set[asyncio.Task[None]] = set()
        self.kept: dict[str, int] = {}  # bastion chains a run still has hosts for (``bastions_kept``): never lingered


registries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Registry] = weakref.WeakKeyDictionary()


def registry_here() -> Registry:
    return registries.setdefault(asyncio.get_running_loop(), Registry())


def open_connections() -> int:
    """SSH connections open now in this event loop (all hosts, idle ones included)."""
    registry = registries.get(asyncio.get_running_loop())
    return registry.open if registry else 0


def idle_connections() -> int:
    """Warm host connections open now in this event loop that no operation uses."""
    registry = registries.get(asyncio.get_running_loop())
    return len(registry.idle) if registry else 0


def host_key(host: Host) -> str:
    return host.model_dump_json(include={"name", "address", "port", "ssh"})


@asynccontextmanager
async def connected(registry: Registry, host: Host, *, idempotent: bool = False,
                    key: str | None = None) -> AsyncIterator[HostConnection]:
    """``key``: ``host_key(host)``, when the caller has it already (a JSON dump of the host's SSH settings)."""
    key = key or host_key(host)
    shared = await acquire(registry, key, host.ssh.max_sessions, functools.partial(open_host, registry, host))
    reopen = functools.partial(reacquire, registry, host) if idempotent and shared.pooled else None
    conn = HostConnection(host, shared, reopen=reopen)
    try:
        yield conn
    finally:
        for each in conn.taken:
            await release(registry, key, each)


async def open_counted(registry: Registry, host: Host,
                       tunnel: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
    """Open host's connection once a slot of ``max_connections`` is free: an idle one is closed for it first."""
    evicted: list[Shared] = []
    async with registry.slots:
        while registry.open >= host.ssh.max_connections:
            victim = evict_idle(registry)
            if victim is None:
                await registry.slots.wait()
            else:
                evicted.append(victim)
        registry.open += 1
    try:
        for victim in evicted:
            await shut(registry, victim)
        return await open_one(registry, host, tunnel)
    except BaseException:
        async with registry.slots:
            registry.open -= 1
            registry.slots.notify_all()
        raise


async def reacquire(registry: Registry, host: Host) -> Shared:
    """The host's connection again, for an operation whose pooled one was found dead (opened anew)."""
    return await acquire(registry, host_key(host), host.ssh.max_sessions, functools.partial(open_host, registry, host))


async def open_host(registry: Registry, host: Host) -> Shared:
    """A new connection to host, through its bastions (held while it is open), counted in max_connections."""
    holds = await hold_hops(registry, host.ssh.jump)
    try:
        conn = await open_counted(registry, host, holds[-1][1].conn if holds else None)
    except BaseException:
        await let_go_hops(registry, holds)
        raise
    shared = Shared(conn, host.ssh.max_sessions)
    shared.hops, shared.idle_close_s = holds, host.ssh.idle_close_s
    return shared


async def hold_hops(registry: Registry, hops: tuple[Hop, ...]) -> list[tuple[str, Shared]]:
    """The shared connection to each chain hops[:1], hops[:2], … (each through the one before), held once."""
    holds: list[tuple[str, Shared]] = []
    try:
        for end in range(1, len(hops) + 1):
            chain = hops[:end]
            tunnel = holds[-1][1].conn if holds else None
            key = chain_key(chain)
            # A bastion that failed is not tried again for connect_timeout_s: a fleet's hosts all get
            # that one error (said once, naming the bastion), not one attempt each.
            shared = await acquire(registry, key, chain[-1].ssh.max_sessions,
                                   functools.partial(wrap_hop, registry, chain, tunnel),
                                   remember_s=chain[-1].ssh.connect_timeout_s)
            holds.append((key, shared))
    except BaseException:
        await let_go_hops(registry, holds)
        raise
    return holds


async def wrap_hop(registry: Registry, hops: tuple[Hop, ...], tunnel: asyncssh.SSHClientConnection | None) -> Shared:
    return Shared(await open_hop(registry, hops, tunnel), hops[-1].ssh.max_sessions)


async def let_go_hops(registry: Registry, holds: list[tuple[str, Shared]]) -> None:
    for key, shared in reversed(holds):
        if shared.users == 1 and shared.reusable():
            # The last host behind it is done: kept while a run has hosts left behind it (``bastions_kept``),
            # else a moment for the next host of the same run, then closed.
            shared.users -= 1
            if key not in registry.kept:
                registry.lingering.add(asyncio.create_task(linger(registry, key, shared)))
        else:
            shared.users -= 1
            if shared.users == 0:
                forget(registry, key, shared)
                await close(shared.conn)


def chain_key(hops: tuple[Hop, ...]) -> str:
    """Hops that log in the same way share one connection, whichever hosts they lead to."""
    not_login = {"jump", "connect_timeout_s", "command_timeout_s", "max_connections", "max_startups", "max_sessions",
                 "idle_close_s", "keepalive_s"}
    return "jump " + " ".join(f"{hop.ssh.model_dump_json(exclude=not_login)}@{hop.address}:{hop.port}" for hop in hops)


async def acquire(registry: Registry, key: str, max_sessions: int, opener: Callable[[], Awaitable[Shared]],
                  remember_s: float = 0) -> Shared:
    seen_attempts = registry.attempts.get(key, 0)
    # One open per key at a time: whoever waited here shares what the first opened, or its failure.
    async with registry.opening.setdefault(key, asyncio.Lock()):
        shared = registry.current.get(key)
        if shared is not None and registry.idle.get(key) is shared:
            unpark(registry, key, shared)  # no await since the lookup: nobody else took or closed it meanwhile
            if not shared.reusable():  # it died while idle (keepalive, or the peer hung up)
                await retire(registry, key, shared)
                shared = None
        if shared is None or not shared.reusable():
            failed = registry.failed.get(key)
            if failed and (failed[0] > seen_attempts or time.monotonic() - failed[2] < remember_s):
                raise type(failed[1])(failed[1].message, hint=failed[1].hint)
            registry.attempts[key] = attempt = registry.attempts.get(key, 0) + 1
            try:
                shared = await opener()
            except ProofbotError as exc:
                registry.failed[key] = (attempt, exc, time.monotonic())
                raise
            registry.failed.pop(key, None)
            registry.current[key] = shared
        shared.users += 1
        return shared


async def release(registry: Registry, key: str, shared: Shared) -> None:
    """One operation is done with a host connection: kept idle when warm, else closed with its last user."""
    shared.users -= 1
    if shared.users > 0:
        return
    if registry.warm and shared.idle_close_s > 0 and shared.reusable() and registry.current.get(key) is shared:
        registry.idle[key] = shared
        shared.pooled = True
        task = shared.idle_task = asyncio.create_task(expire(registry, key, shared))
        registry.closing.add(task)
        task.add_done_callback(registry.closing.discard)
        async with registry.slots:
            registry.slots.notify_all()  # a host waiting for a slot may now close this one for it
        return
    await retire(registry, key, shared)


def unpark(registry: Registry, key: str, shared: Shared) -> None:
    del registry.idle[key]
    if shared.idle_task is not None:
        shared.idle_task.cancel()
        shared.idle_task = None


def forget(registry: Registry, key: str, shared: Shared) -> None:
    if registry.current.get(key) is shared:
        del registry.current[key]


async def retire(registry: Registry, key: str, shared: Shared) -> None:
    """Close a host connection nobody uses, let its bastions go, and free its slot."""
    forget(registry, key, shared)
    try:
        await shut(registry, shared)
    finally:
        async with registry.slots:
            registry.open -= 1
            registry.slots.notify_all()


async def shut(registry: Registry, shared: Shared) -> None:
    holds, shared.hops = shared.hops, []
    try:
        await close(shared.conn)
    finally:
        await let_go_hops(registry, holds)


async def expire(registry: Registry, key: str, shared: Shared) -> None:
    """Close an idle connection after its idle_close_s, or as soon as it closed by itself (a dead peer)."""
    try:
        await asyncio.wait_for(shared.conn.wait_closed(), shared.idle_close_s)
    except TimeoutError:
        pass
    if registry.idle.get(key) is shared:
        del registry.idle[key]
        shared.idle_task = None
        await retire(registry, key, shared)


def evict_idle(registry: Registry) -> Shared | None:
    """The least recently used idle connection, taken out of the pool with its slot freed (the caller
    holds ``registry.slots`` and closes it); None when none is idle."""
    if not registry.idle:
        return None
    key, shared = next(iter(registry.idle.items()))
    unpark(registry, key, shared)
    forget(registry, key, shared)
    registry.open -= 1
    return shared


async def linger(registry: Registry, key: str, shared: Shared) -> None:
    """Close an unused bastion connection after BASTION_LINGER_S, unless a host took it meanwhile."""
    try:
        await asyncio.sleep(BASTION_LINGER_S)
    finally:
        registry.lingering.discard(asyncio.current_task())
        if shared.users == 0 and key not in registry.kept:
            forget(registry, key, shared)
            shared.conn.close()  # not awaited: this may run as the event loop shuts down


@asynccontextmanager
async def bastions_kept(hosts: Iterable[Host], *, at_most_s: float | None = None) -> AsyncIterator[None]:
    """While inside (a fleet's run, a rollout's), the connection to each bastion chain these hosts go through stays
    open between one host and the next, however long that gap (an audit write on a loaded machine passed
    BASTION_LINGER_S), but never past ``at_most_s`` (the run's own deadline: a run stuck past it pins no bastion);
    on leaving, or at that deadline, an unused one lingers and closes as before."""
    registry = registry_here()
    keys = {chain_key(host.ssh.jump[:end]) for host in hosts for end in range(1, len(host.ssh.jump) + 1)}
    for key in keys:
        registry.kept[key] = registry.kept.get(key, 0) + 1
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        for key in keys:
            registry.kept[key] -= 1
            if registry.kept[key] == 0:
                del registry.kept[key]
                shared = registry.current.get(key)
                if shared is not None and shared.users == 0:
                    registry.lingering.add(asyncio.create_task(linger(registry, key, shared)))

    timer = asyncio.get_running_loop().call_later(at_most_s, release) if at_most_s is not None else None
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
        release()


@asynccontextmanager
async def warm_connections() -> AsyncIterator[None]:
    """While inside (``serve``), a host connection stays open after its last operation for ``ssh.idle_close_s``,
    for the next one; an idle one is closed to make room for a new host. On leaving, every idle one is closed."""
    registry = registry_here()
    registry.warm += 1
    try:
        yield
    finally:
        registry.warm -= 1
        if not registry.warm:
            while registry.idle:
                key, shared = next(iter(registry.idle.items()))
                unpark(registry, key, shared)
                await retire(registry, key, shared)
