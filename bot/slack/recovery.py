"""On bot start: tell each interrupted operation's thread what is known, re-arm pending plans.

Each interrupted thread gets the last step recorded and a "Verify now" button, because
after a crash nothing is known about what happened on the host since.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import ActionsBlock, ButtonElement, MarkdownTextObject, SectionBlock
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Message, escape
from bot.slack.plans import arm_expiry, show_expired
from commands.inventory import Inventory
from commands.store import approvals
from commands.store.events import AuditStore
from commands.store.recovery import Interrupted, recover

VERIFY_NOW = "verify_now"
log = logging.getLogger("proofbot.recovery")


def interrupted_message(op: Interrupted) -> Message:
    text = (f":warning: proofbot stopped while this {op.operation} of {op.host} was running. The last step "
            f"recorded was `{op.last_step}` at {op.last_at}; nothing is known about what happened on the host "
            f"after that. Operation `{op.operation_id}` is marked interrupted.")
    blocks = [SectionBlock(text=MarkdownTextObject(text=escape(text).replace("&lt;", "<"))),
              ActionsBlock(elements=[ButtonElement(text="Verify now", action_id=VERIFY_NOW, value=op.operation_id,
                                                   style="primary")])]
    return f"proofbot restarted: {op.operation} of {op.host} was interrupted", [b.to_dict() for b in blocks]


async def recover_in_slack(inventory: Inventory, audit: AuditStore, client: AsyncWebClient,
                           timers: set[asyncio.Task[None]]) -> list[Interrupted]:
    interrupted, pending = await recover(audit)
    for op in interrupted:
        if not op.channel or not op.thread_ts:
            continue
        text, blocks = interrupted_message(op)
        try:
            await client.chat_postMessage(channel=op.channel, thread_ts=op.thread_ts, text=text, blocks=blocks)
        except SlackApiError as exc:
            log.warning("could not post in the thread of %s: %s", op.operation_id, exc.response.get("error"))
    for plan in pending:
        if plan.expires_at <= time.time():
            if await approvals.expire_if_due(audit, plan.id) is not None:
                await show_expired(audit, client, inventory, plan.id)
            continue
        arm_expiry(audit, client, inventory, plan.id, timers)
    return interrupted


async def command_for_click(audit: AuditStore, body: dict[str, Any]) -> dict[str, Any]:
    """The slash command a "Verify now" / "Restart now" click stands for: the operation's host,
    looked up in the audit log by the operation id the button carries."""
    operation_id = str(body["actions"][0]["value"])
    events = await audit.events_of(operation_id)
    host = next((event.host for event in events if event.host), None) or ""
    return {"user_id": body["user"]["id"], "channel_id": body["channel"]["id"], "text": host}
