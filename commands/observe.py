"""The observer seam: the core says what happens (an audit event appended, an SSH connect, a lease taken over)
to whatever a front-end installed (bot/metrics.py: serve's Prometheus counters); with none installed, nothing.

It also carries the operation a task works on (``operation_id``, host) in context variables, so a log line
written anywhere below an operation names it (bot/logs.py puts them in each record).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from commands.store.events import Event

OPERATION_ID: ContextVar[str | None] = ContextVar("proofbot_operation_id", default=None)
HOST: ContextVar[str | None] = ContextVar("proofbot_host", default=None)


class Observer(Protocol):
    """What a front-end hears. Each call is made where it happens (an append: in the store's worker thread),
    so an observer must be quick and thread-safe, and must not raise."""

    def appended(self, event: Event) -> None: ...

    def ssh_connected(self, error: str | None) -> None:
        """One SSH connection opened (``error`` None) or not (the ``commands.errors`` class that says why)."""

    def lease_taken_over(self) -> None:
        """A replica took over an operation whose holder's lease had expired (the PostgreSQL store)."""


_observers: tuple[Observer, ...] = ()


@contextlib.contextmanager
def observing(observer: Observer) -> Iterator[None]:
    """``observer`` hears everything for the block (serve installs its metrics for its lifetime)."""
    global _observers
    _observers = (*_observers, observer)
    try:
        yield
    finally:
        _observers = tuple(o for o in _observers if o is not observer)


def _each(call: str, *args: object) -> None:
    for observer in _observers:
        try:
            getattr(observer, call)(*args)
        except Exception:  # an observer's bug never fails the operation it watches
            logging.getLogger(__name__).exception("observer %s failed on %s", type(observer).__name__, call)


def appended(event: Event) -> None:
    _each("appended", event)


def ssh_connected(error: str | None) -> None:
    _each("ssh_connected", error)


def lease_taken_over() -> None:
    _each("lease_taken_over")


def working_on(operation_id: str | None, host: str | None) -> None:
    """The calling task works on this operation from now on (its log lines name it; child tasks inherit it)."""
    if operation_id is not None and OPERATION_ID.get() != operation_id:
        OPERATION_ID.set(operation_id)
        HOST.set(host)
