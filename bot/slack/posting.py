"""Every message and edit in a channel goes through here: posts and files through the channel's outbox (its order
and Slack's pace), edits through the workspace's parent edits (bot/slack/outbox.py). A message without a thread is
a parent and goes before the replies waiting there; nothing else in bot/slack calls Slack's posting methods."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.outbox import LeftOut, outbox_of, parent_edits_of, unretried

Blocks = list[dict[str, Any]] | None


def post_later(client: AsyncWebClient, channel: str, text: str, blocks: Blocks = None, *,
               thread_ts: str | None = None, droppable: bool = False, **extra: Any) -> asyncio.Future[Any]:
    """Queue a message (a parent when ``thread_ts`` is None); its future has Slack's answer, or None when a full
    outbox left it out (only a ``droppable`` reply can be: a passing check's)."""
    outbox = outbox_of(client, channel)
    call = functools.partial(outbox.client.chat_postMessage, channel=channel, text=text, blocks=blocks,
                             thread_ts=thread_ts, **extra)
    return outbox.send(call, parent=thread_ts is None, droppable=droppable,
                       what=LeftOut(channel, thread_ts, text))


async def post(client: AsyncWebClient, channel: str, text: str, blocks: Blocks = None, *,
               thread_ts: str | None = None, **extra: Any) -> Any:
    """Post and wait for Slack's answer (never left out)."""
    return await post_later(client, channel, text, blocks, thread_ts=thread_ts, **extra)


async def upload(client: AsyncWebClient, channel: str, thread_ts: str, **file: Any) -> Any:
    """A file into a thread, in its turn among the channel's messages."""
    outbox = outbox_of(client, channel)
    return await outbox.send(functools.partial(outbox.client.files_upload_v2, channel=channel, thread_ts=thread_ts,
                                               **file))


async def edit(client: AsyncWebClient, channel: str, ts: str, text: str, blocks: Blocks = None) -> Any:
    """Edit a message (a plan, a verdict): as soon as chat.update's budget allows, waiting out each 429."""
    edits = parent_edits_of(client)
    quiet = edits.client or unretried(client)
    return await edits.verdict(functools.partial(quiet.chat_update, channel=channel, ts=ts, text=text, blocks=blocks))
