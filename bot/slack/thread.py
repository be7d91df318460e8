"""One Slack thread per operation: the parent shows progress and the verdict, replies hold evidence.

Slack calls go through one ordered worker so the operation itself never waits on Slack,
and parent updates are throttled to stay inside chat.update's rate limit.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Message, summary_message
from commands.store.db import AuditStore

UPDATE_INTERVAL_S = 2.0


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
        response = await client.chat_postMessage(channel=channel, text=text, blocks=blocks)
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
        """End the thread with every recorded step of the operation, read back from the audit log."""
        text, blocks = summary_message(operation_id, await audit.events_of(operation_id))
        await self._post(text, blocks)

    async def abandon(self) -> None:
        self._worker.cancel()
        try:
            await self._worker
        except asyncio.CancelledError:
            pass

    async def _drain(self) -> None:
        while (item := await self._queue.get()) is not None:
            kind, (text, blocks) = item
            if kind == "reply":
                await self._post(text, blocks)
            elif kind == "final" or (
                self._pending_update is not None and time.monotonic() - self._last_update >= UPDATE_INTERVAL_S
            ):
                await self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks)
                self._last_update = time.monotonic()

    async def _post(self, text: str, blocks: list[dict[str, Any]]) -> None:
        await self.client.chat_postMessage(channel=self.channel, thread_ts=self.ts, text=text, blocks=blocks)
