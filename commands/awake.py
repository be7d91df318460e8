"""A deadline judged only on time proofbot was awake to watch: when the event loop runs the deadline's timer late
(this process starved of CPU, or the loop busy elsewhere), what arrived meanwhile is read before it is judged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# A timer that runs this much after it was due means the loop did not run in between: the data that came in
# then is waiting in buffers, unread, and the deadline would blame the other side for proofbot's own stall.
LATE_S = 0.25
# How long after a late timer the deadline looks again: a few loop turns to read what is already buffered.
RECHECK_S = 0.25


@asynccontextmanager
async def awake_timeout(seconds: float, *, most_extra_s: float | None = None) -> AsyncIterator[None]:
    """``asyncio.timeout(seconds)``, except that a deadline timer the loop ran late by more than ``LATE_S`` is
    re-armed ``RECHECK_S`` later instead of firing, and fires once it runs on time. Bounded: no timer due after
    ``seconds + most_extra_s`` (default: ``seconds`` again) is re-armed, however late the loop. Raises TimeoutError."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    last = start + seconds + (seconds if most_extra_s is None else most_extra_s)
    async with asyncio.timeout(None) as timeout:
        timers: list[asyncio.TimerHandle] = []

        def arm(at: float) -> None:
            timers.append(loop.call_at(at, due, at))

        def due(at: float) -> None:
            now = loop.time()
            if now - at > LATE_S and at < last:
                arm(now + RECHECK_S)  # the loop stalled across it: read what came in, then judge
            else:
                timeout.reschedule(now)  # fires on the loop's next turn

        arm(start + seconds)
        try:
            yield
        finally:
            timers[-1].cancel()
