"""One Slack thread per operation: the parent shows progress and the verdict, replies hold evidence.

Slack calls go through one ordered worker so the operation itself never waits on Slack,
and parent updates are throttled to stay inside chat.update's rate limit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Message
from bot.slack.thread_blocks import details_file, findings_of, summary_message
from commands.store.db import AuditStore

UPDATE_INTERVAL_S = 2.0
# Slack takes about one message a second per channel: many operations at once in one channel outrun the client's
# own three retries (bot/slack/app.py). A message keeps waiting as Slack says, this long, before it is given up.
PATIENCE_S = 900.0
log = logging.getLogger("proofbot.slack")


async def patiently(call: Callable[[], Awaitable[Any]]) -> Any:
    """``call()``, again after each ``ratelimited`` answer (its Retry-After, plus up to a second so threads that
    wait together do not all come back at once), until PATIENCE_S has passed; other errors at once."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        try:
            return await call()
        except SlackApiError as exc:
            if exc.response.status_code != 429 and exc.response.get("error") != "ratelimited":
                raise
            wait = float(exc.response.headers.get("Retry-After", 1)) + random.random()
            if time.monotonic() + wait > deadline:
                raise
            await asyncio.sleep(wait)


class OperationThread:
    def __init__(self, client: AsyncWebClient, channel: str, ts: str) -> None:
        self.client = client
        self.channel = channel
        self.ts = ts
        self._queue: asyncio.Queue[tuple[str, Message] | None] = asyncio.Queue()
        self._worker = asyncio.create_task(self._drain())
        self._last_update = time.monotonic()
        self._pending_update: Message | None = None

    @classmethod
    async def open(cls, client: AsyncWebClient, channel: str, message: Message) -> OperationThread:
        text, blocks = message
        response = await patiently(lambda: client.chat_postMessage(channel=channel, text=text, blocks=blocks))
        return cls(client, str(response["channel"]), str(response["ts"]))

    def reply(self, message: Message) -> None:
        self._queue.put_nowait(("reply", message))

    def update(self, message: Message) -> None:
        """Show progress on the parent, at most once per UPDATE_INTERVAL_S (the latest wins)."""
        self._pending_update = message
        self._queue.put_nowait(("update", message))

    async def finish(self, message: Message) -> None:
        """Post everything still queued, then put the final message on the parent."""
        self._pending_update = None
        self._queue.put_nowait(("final", message))
        self._queue.put_nowait(None)
        await self._worker

    async def post_summary(self, audit: AuditStore, operation_id: str) -> None:
        """End the thread with every recorded step of the operation, read back from the audit log, then the
        details file: the whole of each long script or raw ``/proc`` output its replies showed cut."""
        events = await audit.events_of(operation_id)
        text, blocks = summary_message(operation_id, events)
        await self._post(text, blocks)
        details = await asyncio.to_thread(details_file, findings_of(events))
        if details is not None:
            await self.client.files_upload_v2(
                channel=self.channel, thread_ts=self.ts, content=details, filename=f"details-{operation_id}.txt",
                title=f"details of operation {operation_id}: whole commands and outputs", request_file_info=False)

    async def abandon(self) -> None:
        self._worker.cancel()
        try:
            await self._worker
        except asyncio.CancelledError:
            pass

    async def _drain(self) -> None:
        """One item after the other; one that Slack will not take is logged and the rest go on, so the
        verdict is still put on the parent (a dead worker would leave it saying "Verifying…" for ever)."""
        while (item := await self._queue.get()) is not None:
            kind, (text, blocks) = item
            try:
                if kind == "reply":
                    await self._post(text, blocks)
                elif kind == "final":
                    await patiently(functools.partial(self.client.chat_update, channel=self.channel, ts=self.ts,
                                                      text=text, blocks=blocks))
                elif self._pending_update is not None and time.monotonic() - self._last_update >= UPDATE_INTERVAL_S:
                    self._last_update = time.monotonic()  # progress: the next one replaces it, no waiting for it
                    await self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks)
            except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("Slack did not take the %s of thread %s in %s: %s", kind, self.ts, self.channel, exc)

    async def _post(self, text: str, blocks: list[dict[str, Any]]) -> None:
        await patiently(functools.partial(self.client.chat_postMessage, channel=self.channel, thread_ts=self.ts,
                                          text=text, blocks=blocks))
