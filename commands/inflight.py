"""Operations in flight started from Slack: per-user and overall limits, and identical requests joined.

A front-end asks ``InFlight.start`` before it acknowledges a request (it is instant and never
awaits, so two requests cannot both take the last slot); it gets a ``Ticket`` that it holds, in a
``with`` block, for as long as the work runs, and that is released on every exit (return,
exception, cancellation). A second request for the same work (same operation, same hosts, same
backups) while the first runs is refused with ``AlreadyRunning``, naming the first; past a limit
with ``OverLimit``, naming what runs. A fleet is one operation; its host verifies draw from one
pool of ``Limits.hosts`` slots shared by every fleet (``host_slots``), so host-level work is
bounded too. The CLI is the operator's own terminal and is not counted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from commands.clock import utc_now
from commands.errors import Refused
from commands.inventory import Limits

SHOWN_MAX = 5  # running operations named in one refusal; the rest are counted


@dataclass(frozen=True)
class Work:
    """What a request would run: ``key`` says when two requests are the same work."""

    user: str  # the actor whose command or click starts it ("slack:U0123ABCD")
    operation: str  # verify, restore, restart, rollout
    hosts: tuple[str, ...]
    backups: tuple[str | None, ...] = ()  # per host, in the order of ``hosts``; empty: none named
    target: str = ""  # as asked ("gpu-west", "ct129"), for people
    plan_id: str | None = None  # an approved plan's apply: its own work, whatever else runs on the host

    @property
    def key(self) -> tuple[str, str | None, tuple[tuple[str, str | None], ...]]:
        backups = self.backups or (None,) * len(self.hosts)
        return (self.operation, self.plan_id,
                tuple(sorted(zip(self.hosts, backups, strict=True), key=lambda pair: pair[0])))

    def describe(self) -> str:
        what = f"{self.operation} {self.target or ' '.join(self.hosts)}"
        return f"{what} (approved plan {self.plan_id})" if self.plan_id else what


@dataclass(eq=False)
class Ticket:
    """One request's place among the operations in flight; a context manager that gives it back."""

    work: Work
    since: str
    _owner: InFlight
    channel: str | None = None
    thread_ts: str | None = None
    operation_id: str | None = None
    released: bool = field(default=False)

    def at(self, channel: str, thread_ts: str, operation_id: str | None = None) -> None:
        """Where the work is shown, once its parent message is posted: refusals link to it."""
        self.channel, self.thread_ts = channel, thread_ts
        self.operation_id = operation_id or self.operation_id

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._owner._running.remove(self)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def to_json(self) -> dict[str, Any]:
        return {"user": self.work.user, "operation": self.work.operation, "what": self.work.describe(),
                "since": self.since, "channel": self.channel, "thread_ts": self.thread_ts,
                "operation_id": self.operation_id}


class InFlightRefusal(Refused):
    """Refused because of what runs: ``running`` names each (who, what, since, where); ``headline`` is the
    message without them, for a front-end that lists them itself."""

    def __init__(self, headline: str, *, hint: str = "", running: list[Ticket]) -> None:
        listed = "; ".join(f"{t.work.describe()} by {t.work.user} since {t.since}" for t in running[:SHOWN_MAX])
        more = f"; and {len(running) - SHOWN_MAX} more" if len(running) > SHOWN_MAX else ""
        super().__init__(f"{headline} (running: {listed}{more})", hint=hint)
        self.headline = headline
        self.running = [ticket.to_json() for ticket in running]


class AlreadyRunning(InFlightRefusal):
    """The same work is running: the request is answered with it instead of starting another."""


class OverLimit(InFlightRefusal):
    """Past ``limits.per_user`` or ``limits.total``."""


class InFlight:
    """The operations in flight in this process (one ``serve`` per audit database), and the host pool."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._running: list[Ticket] = []
        self._host_slots: asyncio.Semaphore | None = None
        self.hosts_in_flight = 0
        self.most_hosts_in_flight = 0  # the high-water mark, for tests and the log

    def running(self) -> list[Ticket]:
        return list(self._running)

    def start(self, work: Work) -> Ticket:
        """Take a slot for ``work`` or raise: ``AlreadyRunning`` for the same work, else ``OverLimit``."""
        # A second click on one plan is judged by the plan's decision (already approved by …), not here.
        same = [ticket for ticket in self._running if ticket.work.key == work.key and work.plan_id is None]
        if same:
            raise AlreadyRunning(f"the same {work.describe()} is already running: nothing new was started",
                                 hint="follow it in its thread", running=same[:1])
        mine = [ticket for ticket in self._running if ticket.work.user == work.user]
        if len(mine) >= self.limits.per_user:
            raise OverLimit(f"you already have {_operations(len(mine))} in flight (limits.per_user is "
                            f"{self.limits.per_user}): {work.describe()} was not started",
                            hint="ask again when one has finished", running=mine)
        if len(self._running) >= self.limits.total:
            raise OverLimit(f"proofbot already has {_operations(len(self._running))} in flight (limits.total is "
                            f"{self.limits.total}): {work.describe()} was not started",
                            hint="ask again when one has finished", running=self.running())
        ticket = Ticket(work, utc_now(), self)
        self._running.append(ticket)
        return ticket

    def host_slots(self) -> HostSlots:
        if self._host_slots is None:  # made lazily: inside the running event loop
            self._host_slots = asyncio.Semaphore(self.limits.hosts)
        return HostSlots(self, self._host_slots)


@dataclass(frozen=True)
class HostSlots:
    """``async with slots:`` around one host's work: at most ``limits.hosts`` at once, all fleets together."""

    owner: InFlight
    semaphore: asyncio.Semaphore

    async def __aenter__(self) -> None:
        await self.semaphore.acquire()
        self.owner.hosts_in_flight += 1
        self.owner.most_hosts_in_flight = max(self.owner.most_hosts_in_flight, self.owner.hosts_in_flight)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.owner.hosts_in_flight -= 1
        self.semaphore.release()


def _operations(count: int) -> str:
    return f"{count} operation{'s' if count != 1 else ''}"
