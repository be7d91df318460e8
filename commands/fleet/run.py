"""Run one piece of work per item, at most ``max_parallel`` at once, each reported as soon as it is done.

The per-host deadline is the work's own (an operation knows what it had shown when time ran
out); this only bounds the fan-out and keeps the results in the order asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


async def run_bounded(items: Sequence[Item], work: Callable[[Item], Awaitable[Result]], *, max_parallel: int,
                      on_done: Callable[[int, Result], Awaitable[None]] | None = None) -> list[Result]:
    """``work(item)`` for every item, ``max_parallel`` at a time; ``on_done(index, result)`` as each ends.

    Work is expected to return its failures as data; an exception (a bug) cancels the rest and
    is raised, so nothing runs on unobserved.
    """
    if max_parallel < 1:
        raise ValueError("max_parallel must be at least 1")
    slots = asyncio.Semaphore(max_parallel)
    results: dict[int, Result] = {}

    async def one(index: int, item: Item) -> None:
        async with slots:
            result = await work(item)
        results[index] = result
        if on_done is not None:
            await on_done(index, result)

    async with asyncio.TaskGroup() as group:
        for index, item in enumerate(items):
            group.create_task(one(index, item))
    return [results[index] for index in range(len(items))]
