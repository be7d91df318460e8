"""Run one piece of work per item, at most ``max_parallel`` at once, each reported as soon as it is done.

The per-host deadline is the work's own (an operation knows what it had shown when time ran
out); this bounds the fan-out, keeps the results in the order asked and, with ``start_by``, gives an item
whose slot comes too late ``late(item)`` instead of its work (the fleet-wide deadline, commands/fleet/deadline.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


async def run_bounded(items: Sequence[Item], work: Callable[[Item], Awaitable[Result]], *, max_parallel: int,
                      on_done: Callable[[int, Result], Awaitable[None]] | None = None,
                      start_by: float | None = None,
                      late: Callable[[Item], Awaitable[Result]] | None = None) -> list[Result]:
    """``work(item)`` for every item, ``max_parallel`` at a time; ``on_done(index, result)`` as each ends.
    An item with no slot by ``start_by`` (the loop's clock) gets ``late(item)``: never started, never dropped.

    Work is expected to return its failures as data; an exception (a bug) cancels the rest and
    is raised, so nothing runs on unobserved.
    """
    if max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    if (start_by is None) != (late is None):
        raise ValueError("start_by and late go together")
    slots = asyncio.Semaphore(max_parallel)
    results: dict[int, Result] = {}

    async def one(index: int, item: Item) -> None:
        try:
            if slots.locked():  # only a wait for a slot needs the deadline's timer (a free one is taken at once)
                async with asyncio.timeout_at(start_by):
                    await slots.acquire()
            else:
                await slots.acquire()
        except TimeoutError:
            assert late is not None  # start_by is None otherwise: no timeout
            result = await late(item)
        else:
            try:
                result = await work(item)
            finally:
                slots.release()
        results[index] = result
        if on_done is not None:
            await on_done(index, result)

    async with asyncio.TaskGroup() as group:
        for index, item in enumerate(items):
            group.create_task(one(index, item))
    return [results[index] for index in range(len(items))]
