"""One Slack thread per operation: the parent shows progress and the verdict, replies hold evidence.

The operation itself never waits on Slack: replies are queued in their channel's outbox, and parent edits are
throttled to stay inside chat.update's rate limit (bot/slack/outbox.py orders both).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Message, context_block
from bot.slack.outbox import parent_edits_of, unretried
from bot.slack.posting import edit, post, post_later, upload
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
        self._edits = parent_edits_of(client)
        # Progress is edited once, never retried on a 429 (the client would wait the Retry-After, holding the verdict);
        # the 429 still counts in serve's metrics.
        self._progress_client = self._edits.client or unretried(client)
        self._replies: list[asyncio.Future[Any]] = []
        self._last_update = time.monotonic()
        self._progress: Message | None = None
        self._progress_task: asyncio.Task[None] | None = None
        self._editing = False
        self._finished = False
        self.left_out = 0  # replies a full outbox left out

    @classmethod
    async def open(cls, client: AsyncWebClient, channel: str, message: Message) -> OperationThread:
        """Post the parent, ahead of the replies of other threads waiting in the channel."""
        response = await post(client, channel, *message)
        return cls(client, str(response["channel"]), str(response["ts"]))

    def reply(self, message: Message, *, droppable: bool = False) -> asyncio.Future[Any]:
        """Queue a reply; ``droppable`` (a passing check's evidence, which the summary lists again) may be left out
        by a full outbox (bot/slack/outbox.py QUEUE_CAP), evidence of a failure never is."""
        posted = post_later(self.client, self.channel, *message, thread_ts=self.ts, droppable=droppable)
        posted.add_done_callback(functools.partial(self._said_if_refused, message[0]))  # whoever waits, or no one
        self._replies.append(posted)
        return posted

    def _said_if_refused(self, text: str, posted: asyncio.Future[Any]) -> None:
        if posted.cancelled():
            return
        if (exc := posted.exception()) is not None:
            log.warning("Slack did not take the reply %r of thread %s in %s: %s", text[:80], self.ts, self.channel,
                        exc)
        elif posted.result() is None:  # a full outbox left it out (logged and audited there)
            self.left_out += 1

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
        try:
            await edit(self.client, self.channel, self.ts, *message)
        except SENDING as exc:  # the replies still go; the log has the verdict
            log.warning("Slack did not take the final edit of thread %s in %s: %s", self.ts, self.channel, exc)
        await asyncio.gather(*self._replies, return_exceptions=True)  # each refusal logged as it came
        self._replies.clear()

    async def post_summary(self, audit: AuditStore, operation_id: str) -> None:
        """End the thread with every recorded step of the operation, read back from the audit log, then the
        details file: the whole of each long script or raw ``/proc`` output its replies showed cut."""
        events = await audit.events_of(operation_id)
        text, blocks = summary_message(operation_id, events)
        if self.left_out:  # the summary is where they are
            blocks = [*blocks, context_block(
                f"{self.left_out} passing {'reply was' if self.left_out == 1 else 'replies were'} left out of this "
                "thread (this channel's outbox was full): every check is listed above").to_dict()]
        await post(self.client, self.channel, text, blocks, thread_ts=self.ts)
        details = await asyncio.to_thread(details_file, findings_of(events))
        if details is not None:
            await upload(self.client, self.channel, self.ts, content=details, filename=f"details-{operation_id}.txt",
                         title=f"details of operation {operation_id}: whole commands and outputs",
                         request_file_info=False)

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
