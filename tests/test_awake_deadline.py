"""A deadline judged only on time proofbot was awake (commands/awake.py): an answer that arrived while the event
loop stalled across the deadline is read, not blamed on the host; one that never comes still times out, bounded."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from commands.awake import awake_timeout

Deadline = Callable[[float], AbstractAsyncContextManager[object]]


async def _answer_arriving_in_a_stall(deadline: Deadline, seconds: float, stall_s: float) -> bytes:
    """Wait up to ``seconds`` for a line the peer sends while the loop is stalled past that deadline (as when
    the process gets no CPU): the line is in the socket when the loop wakes, with the deadline's timer overdue."""
    ours, peer = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)

    def stall() -> None:
        time.sleep(stall_s)  # the loop does not run: nothing reads, no timer fires
        peer.send(b"200 OK\n")

    try:
        asyncio.get_running_loop().call_later(0.01, stall)
        async with deadline(seconds):
            line = await reader.readline()
            for _ in range(5):  # the layers above (SSH channel, HTTP parser) take a few turns of the loop
                await asyncio.sleep(0)
            return line
    finally:
        writer.close()
        peer.close()


async def test_plain_asyncio_timeout_blames_the_peer_for_a_stall_of_our_own() -> None:
    """The failure awake_timeout exists for: the overdue timer runs before the reader sees the buffered line."""
    with pytest.raises(TimeoutError):
        await _answer_arriving_in_a_stall(asyncio.timeout, 0.2, 0.6)


async def test_an_answer_that_arrived_during_a_stall_past_the_deadline_is_read() -> None:
    assert await _answer_arriving_in_a_stall(awake_timeout, 0.2, 0.6) == b"200 OK\n"


async def test_no_answer_times_out_when_the_loop_runs_on_time() -> None:
    reader = asyncio.StreamReader()
    with pytest.raises(TimeoutError):
        async with awake_timeout(0.2):
            await reader.readline()


@pytest.fixture
async def a_loop_that_stalls_again_and_again() -> AsyncIterator[None]:
    """Every turn of the loop stalls 0.6 s: every timer runs late, for as long as the test lasts."""
    loop = asyncio.get_running_loop()
    stalling = True

    def stall() -> None:
        time.sleep(0.6)
        if stalling:
            loop.call_soon(stall)

    loop.call_soon(stall)
    yield
    stalling = False


@pytest.mark.usefixtures("a_loop_that_stalls_again_and_again")
async def test_no_answer_still_times_out_when_every_timer_runs_late() -> None:
    """Bounded: however late the loop, no timer due past seconds + most_extra_s is re-armed. An unbounded one
    would wait forever: the plain wait around it (which fires however late) says so, long before."""
    reader = asyncio.StreamReader()

    async def waits() -> None:
        async with awake_timeout(0.2, most_extra_s=0.6):
            await reader.readline()

    waiting = asyncio.create_task(waits())
    done, _ = await asyncio.wait({waiting}, timeout=20)
    if not done:
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
    assert waiting in done, "awake_timeout never fired while every timer ran late"
    with pytest.raises(TimeoutError):
        waiting.result()
