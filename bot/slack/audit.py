"""``/audit [HOST] [N]`` in Slack: parse and check the request, then post the trail as a thread.

The parent says "Audit trail for ct129: last N operations"; each reply is one operation
with a permalink (``chat.getPermalink``) to the thread where that operation ran. The
request itself is recorded as a ``viewed`` event pointing at the thread it posted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.audit_blocks import audit_operation_message, audit_parent_message
from bot.slack.listening import Body, BotContext, SlackCommand
from bot.slack.posting import post
from commands.errors import UsageError
from commands.inventory import Inventory
from commands.operation import Origin
from commands.store import DEFAULT_LIMIT
from commands.store.db import AuditStore
from commands.store.trail import OperationRecord, recent_operations, record_view

SLACK_MAX_LIMIT = 25  # one reply each; chat.postMessage allows about one a second per channel
USAGE = "usage: /audit [HOST] [N]"


@dataclass(frozen=True)
class AuditRequest:
    host: str | None
    limit: int


def audit_request(inventory: Inventory, text: str) -> AuditRequest:
    """``[HOST] [N]``: HOST only ever looked up in the inventory; N from 1 to SLACK_MAX_LIMIT."""
    words = text.split()
    if len(words) > 2:
        raise UsageError(USAGE, hint="for example /audit ct129 5, or /audit for every host")
    host: str | None = None
    if words and not (len(words) == 1 and _count(words[0]) and words[0] not in inventory.hosts):
        host = inventory.host(words.pop(0)).name
    limit = DEFAULT_LIMIT
    if words:
        if not _count(words[0]) or not 1 <= int(words[0]) <= SLACK_MAX_LIMIT:
            raise UsageError(f"N must be a whole number from 1 to {SLACK_MAX_LIMIT}", hint=USAGE)
        limit = int(words[0])
    return AuditRequest(host, limit)


def _count(word: str) -> bool:
    """ASCII digits only: str.isdigit() also says yes to '²' and '٣', which int() then refuses."""
    return word.isascii() and word.isdigit()


async def audit_in_thread(client: AsyncWebClient, store: AuditStore, command: dict[str, Any],
                          request: AuditRequest, records: list[OperationRecord]) -> None:
    records, elsewhere = visible_in(str(command["channel_id"]), records)
    links = await asyncio.gather(*(_permalink(client, record) for record in records))
    text, blocks = audit_parent_message(request.host, records, command["user_id"], elsewhere)
    parent = await post(client, command["channel_id"], text, blocks)
    channel, ts = str(parent["channel"]), str(parent["ts"])
    origin = Origin(actor=f"slack:{command['user_id']}", via="slack", channel=channel, thread_ts=ts)
    await record_view(store, host=request.host, limit=request.limit, origin=origin, listed=records)
    for record, (link, error) in zip(records, links, strict=True):
        text, blocks = audit_operation_message(record, link, error)
        await post(client, channel, text, blocks, thread_ts=ts)


async def _permalink(client: AsyncWebClient, record: OperationRecord) -> tuple[str | None, str | None]:
    """The operation's own thread, or why there is no link (CLI operations have no thread)."""
    if not (record.channel and record.thread_ts):
        return None, None
    try:
        response = await client.chat_getPermalink(channel=record.channel, message_ts=record.thread_ts)
    except SlackApiError as exc:
        return None, str(exc.response.get("error") or "error")
    return str(response["permalink"]), None


async def on_command(context: BotContext, ack: AsyncAck, command: Body, client: AsyncWebClient) -> None:
    request = audit_request(context.inventory, command.get("text", ""))
    # Read before the ack (two indexed queries): a log that cannot be read (a hand-edited BLOB) is then
    # the ack's own ephemeral error; raised after it, bolt would drop the ack and Slack show a timeout.
    records = await recent_operations(context.audit, request.host, request.limit)
    await ack()
    await audit_in_thread(client, context.audit, command, request, records)


def visible_in(channel: str, records: list[OperationRecord]) -> tuple[list[OperationRecord], int]:
    """What a trail posted in CHANNEL may show: every member of it reads the thread, so an operation run in
    another channel (whose members may differ) is counted, not told; CLI operations have no channel and
    show, as on App Home."""
    shown = [record for record in records if not record.channel or record.channel == channel]
    return shown, len(records) - len(shown)


COMMAND = SlackCommand("audit", on_command, empty_text_is_help=False)
