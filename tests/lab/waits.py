"""Waiting on a condition with a deadline (never a fixed sleep): tests poll what proves the
thing happened, and fail naming what did not happen in time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(what: str, probe: Callable[[], object], timeout_s: float = 30.0, interval_s: float = 0.02) -> None:
    """Poll probe() (cheap, non-blocking) until it returns something truthy; AssertionError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s:g} s")
        await asyncio.sleep(interval_s)
