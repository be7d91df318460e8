"""``connect``, the SSH boundary's entry, and ``connect_ahead``: a login started before the operation asks for
it, taken over by ``connect`` (or its failure raised) without a second attempt."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from commands.errors import ProofbotError
from commands.inventory import Host
from commands.ssh.channels import HostConnection
from commands.ssh.pool import Registry, connected, host_key, registries


@asynccontextmanager
async def connect(host: Host, *, idempotent: bool = False) -> AsyncIterator[HostConnection]:
    """A host-key-verified SSH connection to host, shared with every operation on it that overlaps.

    Operations on one host at the same time share one connection (one login); it is closed
    when the last of them leaves, and one that dropped is never handed out again. Opening a
    connection waits while ``ssh.max_connections`` are open in all. A host behind
    ``ssh.jump`` is reached through one connection to the bastion shared by every host behind
    it, opened on first use and closed when the last of them is done. A connection opened
    ahead (``connect_ahead``) is taken over, or its failure raised, without a second attempt.

    Under ``warm_connections`` (``serve``) the connection stays open after the last operation, idle, for the
    next one. ``idempotent``: the caller only reads (verify, ping): if the pooled connection it was given
    turns out dead, its command is sent again, once, over a new connection; anything else (a restore, a
    restart) fails with the dropped link as it would on a fresh connection, and is never run twice.
    """
    registry = registries.setdefault(asyncio.get_running_loop(), Registry())
    key = host_key(host)
    ahead = registry.ahead.pop(key, None)
    try:
        if ahead is not None:
            await ahead.settled.wait()
            if ahead.error is not None:
                raise type(ahead.error)(ahead.error.message, hint=ahead.error.hint)
        async with connected(registry, host, idempotent=idempotent, key=key) as conn:
            if ahead is not None:
                ahead.taken.set()  # this operation holds the connection now; the one ahead lets go
            yield conn
    finally:  # also when cancelled while waiting (a fleet's host deadline): the one ahead lets go now
        if ahead is not None:
            ahead.taken.set()


class Ahead:
    """A connection being opened before the operation that will use it asks for it."""

    def __init__(self) -> None:
        self.settled = asyncio.Event()  # open, or failed
        self.taken = asyncio.Event()  # the operation has it (or gave up on it)
        self.error: ProofbotError | None = None
        self.task: asyncio.Task[None] | None = None


AHEAD_HOLD_S = 30.0  # a connection opened ahead that nobody takes is closed after this


def connect_ahead(hosts: Sequence[Host]) -> None:
    """Start opening the connections these hosts' operation is about to ask ``connect`` for.

    A CLI command calls it as soon as it knows its hosts, so the SSH handshake (a login, no
    command) runs while the command loads the rest of itself and opens the audit log.
    ``connect`` then takes the connection over, or raises its error: never a second attempt.
    Only a login happens ahead: nothing runs on a host before its operation is recorded.
    """
    registry = registries.setdefault(asyncio.get_running_loop(), Registry())
    for host in hosts:
        key = host_key(host)
        if key not in registry.ahead:
            ahead = registry.ahead[key] = Ahead()
            ahead.task = asyncio.create_task(_hold_ahead(registry, host, key, ahead))


async def _hold_ahead(registry: Registry, host: Host, key: str, ahead: Ahead) -> None:
    """Open and hold the connection until the operation takes it; a failure is kept for it as long."""
    try:
        async with connected(registry, host, key=key):
            ahead.settled.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(AHEAD_HOLD_S):
                    await ahead.taken.wait()
    except ProofbotError as exc:
        ahead.error = exc
        ahead.settled.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(AHEAD_HOLD_S):
                await ahead.taken.wait()
    finally:
        ahead.settled.set()
        if registry.ahead.get(key) is ahead:
            del registry.ahead[key]

