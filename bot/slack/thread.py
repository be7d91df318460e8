"""One Slack thread per operation: the parent shows progress and the verdict, replies hold evidence.

The operation itself never waits on Slack: replies are queued in their channel's outbox, and parent edits are
throttled to stay inside chat.update's rate limit (bot/slack/outbox.py orders both).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import time
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.metrics import RateLimitCounting
from bot.slack.blocks import Message
from bot.slack.outbox import outbox_of, parent_edits_of
from bot.slack.thread_blocks import details_file, findings_of, summary_message
from commands.store.db import AuditStore

UPDATE_INTERVAL_S = 2.0
# A verdict waits this long for its own evidence replies: when Slack keeps up, the thread is whole before the
# parent says PASS (what a reader expects); at Slack's per-channel pace behind other threads, it goes anyway.
VERDICT_WAITS_FOR_EVIDENCE_S = 10.0
log = logging.getLogger("proofbot.slack")
SENDING = (SlackApiError, aiohttp.ClientError, TimeoutError)


class OperationThread:
    """A thread's replies go through its channel's outbox (bot/slack/outbox.py), in order, each Slack will take
    posted, one it refuses logged and left out; its parent's edits (progress, then the verdict) go apart from them,
    so the verdict is shown once its evidence is posted, or at most VERDICT_WAITS_FOR_EVIDENCE_S after the operation
    ends while its evidence is still on its way to the thread (Slack's pace, other threads ahead in the channel)."""

    def __init__(self, client: AsyncWebClient, channel: str, ts: str) -> None:
        self.client = client
        self.channel = channel
        self.ts = ts
        self._outbox = outbox_of(client, channel)
        self._edits = parent_edits_of(client)
        # Progress is edited once, never retried on a 429 (the client would wait the Retry-After, holding the verdict);
        # the 429 still counts in serve's metrics.
        self._progress_client = copy.copy(client)
        self._progress_client.retry_handlers = [
            RateLimitCounting(max_retry_count=0) if isinstance(handler, AsyncRateLimitErrorRetryHandler) else handler
            for handler in client.retry_handlers]
        self._replies: list[asyncio.Future[Any]] = []
        self._last_update = time.monotonic()
        self._progress: Message | None = None
        self._progress_task: asyncio.Task[None] | None = None
        self._editing = False
        self._finished = False

    @classmethod
    async def open(cls, client: AsyncWebClient, channel: str, message: Message) -> OperationThread:
        """Post the parent, ahead of the replies of other threads waiting in the channel."""
        text, blocks = message
        response = await outbox_of(client, channel).send(
            lambda: client.chat_postMessage(channel=channel, text=text, blocks=blocks), parent=True)
        return cls(client, str(response["channel"]), str(response["ts"]))

    def reply(self, message: Message) -> None:
        text, blocks = message
        posted = self._outbox.send(functools.partial(
            self.client.chat_postMessage, channel=self.channel, thread_ts=self.ts, text=text, blocks=blocks))
        posted.add_done_callback(functools.partial(self._said_if_refused, text))  # whoever waits for it, or no one
        self._replies.append(posted)

    def _said_if_refused(self, text: str, posted: asyncio.Future[Any]) -> None:
        if not posted.cancelled() and (exc := posted.exception()) is not None:
            log.warning("Slack did not take the reply %r of thread %s in %s: %s", text[:80], self.ts, self.channel,
                        exc)

    def update(self, message: Message) -> None:
        """Show progress on the parent, at most once per UPDATE_INTERVAL_S (the latest wins)."""
        if self._finished:
            return
        self._progress = message
        if self._progress_task is None or self._progress_task.done():
            self._progress_task = asyncio.create_task(self._show_progress())

    async def finish(self, message: Message) -> None:
        """Put the final message on the parent once the replies queued are posted (or after a bounded wait for them),
        then wait until every reply queued is posted (or refused)."""
        await self._stop_progress()
        if self._replies:
            await asyncio.wait(self._replies, timeout=VERDICT_WAITS_FOR_EVIDENCE_S)
        text, blocks = message
        try:
            await self._edits.verdict(functools.partial(self.client.chat_update, channel=self.channel, ts=self.ts,
                                                        text=text, blocks=blocks))
        except SENDING as exc:  # the replies still go; the log has the verdict
            log.warning("Slack did not take the final edit of thread %s in %s: %s", self.ts, self.channel, exc)
        await asyncio.gather(*self._replies, return_exceptions=True)  # each refusal logged as it came
        self._replies.clear()

    async def post_summary(self, audit: AuditStore, operation_id: str) -> None:
        """End the thread with every recorded step of the operation, read back from the audit log, then the
        details file: the whole of each long script or raw ``/proc`` output its replies showed cut."""
        events = await audit.events_of(operation_id)
        text, blocks = summary_message(operation_id, events)
        await self._outbox.send(functools.partial(self.client.chat_postMessage, channel=self.channel,
                                                  thread_ts=self.ts, text=text, blocks=blocks))
        details = await asyncio.to_thread(details_file, findings_of(events))
        if details is not None:
            await self._outbox.send(functools.partial(
                self.client.files_upload_v2, channel=self.channel, thread_ts=self.ts, content=details,
                filename=f"details-{operation_id}.txt",
                title=f"details of operation {operation_id}: whole commands and outputs", request_file_info=False))

    async def abandon(self) -> None:
        """Take back the replies not posted yet and stop showing progress."""
        for posted in self._replies:
            posted.cancel()
        self._replies.clear()
        await self._stop_progress()

    async def _stop_progress(self) -> None:
        """No more progress; an edit already on its way to Slack lands first (never after the verdict)."""
        self._finished, self._progress = True, None
        task = self._progress_task
        if task is None:
            return
        if not self._editing:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _show_progress(self) -> None:
        while self._progress is not None:
            wait = self._last_update + UPDATE_INTERVAL_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            message, self._progress = self._progress, None
            if message is None or self._finished:
                return
            text, blocks = message
            self._editing = True
            try:
                if await self._edits.progress(functools.partial(
                        self._progress_client.chat_update, channel=self.channel, ts=self.ts, text=text, blocks=blocks)):
                    self._last_update = time.monotonic()
            except SENDING as exc:
                log.warning("Slack did not take a progress edit of thread %s in %s: %s", self.ts, self.channel, exc)
            finally:
                self._editing = False
