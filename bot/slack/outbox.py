"""The order threads' messages leave in. Slack takes about one message a second in a channel, so there an
operation's parent goes before the evidence replies already waiting (oldest first, each thread's in order); and a
verdict on a parent never waits behind replies: chat.update has a limit of its own (per workspace), which verdicts
have first call on and progress only what is left of."""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

# Many operations at once in one channel outrun the client's own three retries of a 429 (bot/slack/app.py): a
# message keeps waiting as Slack says, this long once it is next, before it is given up.
PATIENCE_S = 900.0
# Progress edits of parents at most this many a minute in a workspace: chat.update is Tier 3 (50+ a minute,
# per workspace); the rest is kept for verdicts, which are never held back by this.
PROGRESS_PER_MINUTE = 20

Call = Callable[[], Awaitable[Any]]


def _retry_after(exc: SlackApiError) -> float | None:
    """The seconds Slack said to wait, or None when this is not a rate limit."""
    if exc.response.status_code != 429 and exc.response.get("error") != "ratelimited":
        return None
    return float(exc.response.headers.get("Retry-After", 1))


async def patiently(call: Call) -> Any:
    """``call()``, again after each ``ratelimited`` answer (its Retry-After, plus up to a second so replicas that
    wait together do not all come back at once), until PATIENCE_S has passed; other errors at once."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        try:
            return await call()
        except SlackApiError as exc:
            wait = _retry_after(exc)
            if wait is None or time.monotonic() + wait > deadline:
                raise
            await asyncio.sleep(wait + random.random())


class ChannelOutbox:
    """Messages to one channel, one call at a time: parents first, then the rest in the order they came (so each
    thread's replies stay in order); a 429 holds the whole channel for its Retry-After, then the same message."""

    def __init__(self) -> None:
        self._parents: deque[tuple[Call, asyncio.Future[Any]]] = deque()
        self._rest: deque[tuple[Call, asyncio.Future[Any]]] = deque()
        self._sender: asyncio.Task[None] | None = None

    def send(self, call: Call, *, parent: bool = False) -> asyncio.Future[Any]:
        """Queue ``call``; its future has the answer (or the error Slack gave). Cancel it to take the call back."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        (self._parents if parent else self._rest).append((call, future))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())
        return future

    async def _send(self) -> None:
        while self._parents or self._rest:
            call, future = (self._parents or self._rest).popleft()
            if future.done():  # taken back (an abandoned thread)
                continue
            try:
                answer = await patiently(call)
            except Exception as exc:  # the caller's, through its future; the next message goes on
                if not future.done():
                    future.set_exception(exc)
            else:
                if not future.done():
                    future.set_result(answer)


class ParentEdits:
    """chat.update of thread parents in one workspace: a verdict as soon as Slack takes it; progress only while no
    verdict waits, Slack has not said to wait, and fewer than PROGRESS_PER_MINUTE went in the last minute (a
    progress edit left out is replaced by the next one, or by the verdict). A 429 holds every edit."""

    def __init__(self) -> None:
        self._held_until = 0.0
        self._verdicts_waiting = 0
        self._progress_sent: deque[float] = deque()

    def _hold(self, exc: SlackApiError) -> bool:
        wait = _retry_after(exc)
        if wait is None:
            return False
        self._held_until = max(self._held_until, time.monotonic() + wait)
        return True

    async def progress(self, call: Call) -> bool:
        """Edit once, without retrying a 429 (the next edit will do); False when left out."""
        now = time.monotonic()
        while self._progress_sent and now - self._progress_sent[0] >= 60.0:
            self._progress_sent.popleft()
        if self._verdicts_waiting or now < self._held_until or len(self._progress_sent) >= PROGRESS_PER_MINUTE:
            return False
        self._progress_sent.append(now)
        try:
            await call()
        except SlackApiError as exc:
            if not self._hold(exc):
                raise
            return False
        return True

    async def verdict(self, call: Call) -> Any:
        """Edit, waiting out each 429 (and any hold another edit's 429 started) until PATIENCE_S has passed."""
        self._verdicts_waiting += 1
        deadline = time.monotonic() + PATIENCE_S
        try:
            while True:
                held = self._held_until - time.monotonic()
                if held > 0:
                    await asyncio.sleep(held + random.random())
                try:
                    return await call()
                except SlackApiError as exc:
                    if not self._hold(exc) or self._held_until > deadline:
                        raise
        finally:
            self._verdicts_waiting -= 1


_outboxes: weakref.WeakValueDictionary[tuple[Any, ...], ChannelOutbox] = weakref.WeakValueDictionary()
_edits: weakref.WeakValueDictionary[tuple[Any, ...], ParentEdits] = weakref.WeakValueDictionary()


def _workspace(client: AsyncWebClient) -> tuple[Any, ...]:
    # One per event loop (a test's loop ends with it) and Slack workspace (the API and the token)
    return asyncio.get_running_loop(), client.base_url, client.token


def outbox_of(client: AsyncWebClient, channel: str) -> ChannelOutbox:
    """The channel's outbox, shared by every thread posting there (kept while one of them holds it)."""
    key = (*_workspace(client), channel)
    outbox = _outboxes.get(key)
    if outbox is None:
        outbox = _outboxes[key] = ChannelOutbox()
    return outbox


def parent_edits_of(client: AsyncWebClient) -> ParentEdits:
    key = _workspace(client)
    edits = _edits.get(key)
    if edits is None:
        edits = _edits[key] = ParentEdits()
    return edits
