"""The order and pace threads' messages leave in. Slack takes about one message a second in a channel, so there an
operation's parent goes before the evidence replies already waiting (oldest first, each thread's in order), paced
so Slack is not asked faster than it takes; a verdict on a parent never waits behind replies: chat.update has a
limit of its own (per workspace), which verdicts have first call on and progress only what is left of."""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.metrics import RateLimitCounting
from bot.slack.pace import Pace
from bot.slack.redacting import RedactingWebClient

# Many operations at once in one channel: a message keeps waiting as Slack says, this long once it is next,
# before it is given up (its caller is told; never silently).
PATIENCE_S = 900.0
# Progress edits of parents at most this many a minute in a workspace: chat.update is Tier 3 (50+ a minute,
# per workspace); the rest is kept for verdicts, which are never held back by this.
PROGRESS_PER_MINUTE = 20
# Messages waiting in one channel past which a droppable one (a passing check's reply: the thread's summary,
# read back from the audit log, still lists it) is left out; messages that must go (parents, verdicts, evidence
# of a failure) are kept even past it: they are bounded by the operations in flight (limits.operations).
QUEUE_CAP = 200

Call = Callable[[], Awaitable[Any]]
log = logging.getLogger("proofbot.slack")


@dataclass(frozen=True)
class LeftOut:
    """Messages a full outbox left out of a channel: what the audit log records (``slack-left-out``)."""

    channel: str
    thread_ts: str | None
    text: str


# Told of each message left out, synchronously: it schedules its own write (serve: a task serve holds and drains
# before its store closes, bot/slack/listening.py ``keep``), so the outbox holds no task of its own.
LeftOutRecorder = Callable[[LeftOut], None]


def retry_after(exc: SlackApiError) -> float | None:
    """The seconds Slack said to wait, or None when this is not a rate limit."""
    if exc.response.status_code != 429 and exc.response.get("error") != "ratelimited":
        return None
    return float(exc.response.headers.get("Retry-After", 1))


def unretried(client: AsyncWebClient) -> AsyncWebClient:
    """``client``, redacting (whichever client made a channel's outbox, every message through it is masked),
    without slack_sdk's own 429 retries (still counted in serve's metrics): the outbox and the edits see every 429
    and wait it out themselves, holding what is behind the message too."""
    quiet = copy.copy(RedactingWebClient.like(client))
    quiet.retry_handlers = [
        RateLimitCounting(max_retry_count=0) if isinstance(handler, AsyncRateLimitErrorRetryHandler) else handler
        for handler in client.retry_handlers]
    return quiet


@dataclass
class _Queued:
    call: Call
    future: asyncio.Future[Any]
    droppable: bool
    what: LeftOut | None


class ChannelOutbox:
    """Messages to one channel, one call at a time at Slack's pace (bot/slack/pace.py): parents first, then the rest
    in the order they came (so each thread's replies stay in order); a 429 holds the whole channel for its
    Retry-After (another replica posts there too, or Slack is stricter than its pace), then the same message."""

    def __init__(self, client: AsyncWebClient, on_left_out: LeftOutRecorder | None = None) -> None:
        self.client = client  # unretried (``unretried``): the one the calls queued here use
        self.on_left_out = on_left_out
        self.pace = Pace()
        self.left_out = 0
        self._parents: deque[_Queued] = deque()
        self._rest: deque[_Queued] = deque()
        self._sender: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._parents) + len(self._rest)

    def send(self, call: Call, *, parent: bool = False, droppable: bool = False,
             what: LeftOut | None = None) -> asyncio.Future[Any]:
        """Queue ``call``; its future has the answer (or the error Slack gave; None when it was left out, which
        only a ``droppable`` one can be, ``what`` saying what it was). Cancel it to take the call back."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        queued = _Queued(call, future, droppable and not parent, what)
        if len(self) >= QUEUE_CAP and not self._drop_one(queued) and len(self) == QUEUE_CAP:  # said once a crossing
            log.warning("%d messages wait for one channel, none of them a passing reply: all kept", len(self))
        if not future.done():
            (self._parents if parent else self._rest).append(queued)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())
        return future

    def _drop_one(self, new: _Queued) -> bool:
        """Leave out the oldest droppable message waiting (or ``new``, if none is and it is); False when none is."""
        victim = next((queued for queued in self._rest if queued.droppable and not queued.future.done()), None)
        if victim is not None:
            self._rest.remove(victim)
        elif new.droppable:
            victim = new
        else:
            return False
        self.left_out += 1
        victim.future.set_result(None)
        what = victim.what or LeftOut("?", None, "?")
        log.warning("the outbox of %s is full (%d waiting): left out the passing reply %r of thread %s; the "
                    "thread's summary still lists it", what.channel, len(self), what.text[:80], what.thread_ts)
        if self.on_left_out is not None:
            self.on_left_out(what)
        return True

    async def _send(self) -> None:
        while self._parents or self._rest:
            queued = (self._parents or self._rest).popleft()
            if queued.future.done():  # taken back (an abandoned thread)
                continue
            try:
                answer = await self._patiently(queued)
            except Exception as exc:  # the caller's, through its future; the next message goes on
                if not queued.future.done():
                    queued.future.set_exception(exc)
            else:
                if not queued.future.done():
                    queued.future.set_result(answer)
        self._sender = None  # idle: nothing of this loop held (the outbox outlives it in _outboxes)

    async def _patiently(self, queued: _Queued) -> Any:
        """The call at the channel's pace, again after each ``ratelimited`` answer (its Retry-After, plus up to a
        second so replicas that wait together do not all come back at once), until PATIENCE_S has passed."""
        deadline = time.monotonic() + PATIENCE_S
        while True:
            await asyncio.sleep(self.pace.wait_s(time.monotonic()))
            if queued.future.done():
                return None
            try:
                answer = await queued.call()
            except SlackApiError as exc:
                self.pace.sent(time.monotonic())
                wait = retry_after(exc)
                if wait is None or time.monotonic() + wait > deadline:
                    raise
                self.pace.limited(time.monotonic() + wait + random.random())
                continue
            self.pace.sent(time.monotonic())
            return answer


class ParentEdits:
    """chat.update of thread parents in one workspace: a verdict as soon as Slack takes it; progress only while no
    verdict waits, Slack has not said to wait, and fewer than PROGRESS_PER_MINUTE went in the last minute (a
    progress edit left out is replaced by the next one, or by the verdict). A 429 holds every edit."""

    def __init__(self, client: AsyncWebClient | None = None) -> None:
        self.client = client  # unretried
        self._held_until = 0.0
        self._verdicts_waiting = 0
        self._progress_sent: deque[float] = deque()

    def _hold(self, exc: SlackApiError) -> bool:
        wait = retry_after(exc)
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


# Kept while their loop lives, idle ones too: a channel's pace (its burst used, a 429's hold) outlives a thread
_outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], ChannelOutbox]] = (
    weakref.WeakKeyDictionary())
_edits: weakref.WeakValueDictionary[tuple[Any, ...], ParentEdits] = weakref.WeakValueDictionary()
_recorders: dict[tuple[Any, ...], LeftOutRecorder] = {}


def _workspace(client: AsyncWebClient) -> tuple[Any, ...]:
    # One per event loop (a test's loop ends with it) and Slack workspace (the API and the token)
    return asyncio.get_running_loop(), client.base_url, client.token


def record_left_out(client: AsyncWebClient, recorder: LeftOutRecorder | None) -> None:
    """Each message a full outbox of this workspace leaves out is handed to ``recorder`` (serve: the audit log);
    None stops it."""
    key = _workspace(client)
    if recorder is None:
        _recorders.pop(key, None)
    else:
        _recorders[key] = recorder
    for (url, token, _), outbox in _outboxes.get(key[0], {}).items():
        if (url, token) == key[1:]:
            outbox.on_left_out = recorder


def outbox_of(client: AsyncWebClient, channel: str) -> ChannelOutbox:
    """The channel's outbox, shared by everything posting there (kept while the loop lives)."""
    workspace = _workspace(client)
    outboxes = _outboxes.setdefault(workspace[0], {})
    key = (*workspace[1:], channel)
    outbox = outboxes.get(key)
    if outbox is None:
        outbox = outboxes[key] = ChannelOutbox(unretried(client), _recorders.get(workspace))
    return outbox


def parent_edits_of(client: AsyncWebClient) -> ParentEdits:
    key = _workspace(client)
    edits = _edits.get(key)
    if edits is None:
        edits = _edits[key] = ParentEdits(unretried(client))
    return edits
