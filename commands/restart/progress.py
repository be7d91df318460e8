"""Progress delivery for a restart: every state change and a heartbeat, never holding up the polls.

The front-end's callback runs in its own task, one call at a time; while it is busy only
the newest progress is kept, so a slow Slack update delays nothing and floods nothing.
A callback that raises is logged and ignored: a front-end's failure must not abort a
restart half-way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from commands.restart.watch import RestartProgress

HEARTBEAT_S = 2.0
CLOSE_TIMEOUT_S = 10.0

OnProgress = Callable[[RestartProgress], Awaitable[None]]
log = logging.getLogger(__name__)


class ProgressSink:
    """Delivers progress without ever holding up the polls: the newest state wins, one call at a time."""

    def __init__(self, callback: OnProgress | None) -> None:
        self._callback = callback
        self._pending: RestartProgress | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_key: tuple[object, ...] | None = None
        self._last_sent = 0.0

    def offer(self, progress: RestartProgress, *, force: bool = False) -> None:
        if self._callback is None:
            return
        now = time.monotonic()
        if not force and progress.key() == self._last_key and now - self._last_sent < HEARTBEAT_S:
            return
        self._last_key, self._last_sent, self._pending = progress.key(), now, progress
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._deliver())

    async def _deliver(self) -> None:
        while self._pending is not None and self._callback is not None:
            progress, self._pending = self._pending, None
            try:
                await self._callback(progress)
            except Exception:  # a front-end's failure must not abort a restart half-way
                log.exception("on_progress callback failed; the restart goes on")

    async def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Deliver what is pending; a front-end stuck longer than timeout_s is given up on."""
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        except TimeoutError:
            log.warning("on_progress still busy after %.0f s; the last progress is dropped", timeout_s)
            self._task.cancel()
