"""Plans awaiting approval in Slack, whatever the operation: expiry timers and their messages."""

from __future__ import annotations

import asyncio
import time

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Message, decided_message, restart_status_message
from commands.inventory import Inventory
from commands.restart.plan import RestartPlan
from commands.restore.plan import plan_from_json
from commands.store import approvals
from commands.store.events import AuditStore


def decided(inventory: Inventory, pending: approvals.PendingPlan, status: str) -> Message:
    """The plan's message without buttons, saying what became of it."""
    host = inventory.host(pending.host)
    requester = pending.requested_by.removeprefix("slack:")
    if pending.operation == "restart":
        return restart_status_message(RestartPlan.from_json(pending.details, host), requester, status)
    return decided_message(plan_from_json(host, pending.details), requester, status)


def arm_expiry(audit: AuditStore, client: AsyncWebClient, inventory: Inventory, plan_id: str,
               timers: set[asyncio.Task[None]]) -> None:
    timer = asyncio.create_task(_expire_later(audit, client, plan_id, inventory))
    timers.add(timer)
    timer.add_done_callback(timers.discard)


async def _expire_later(audit: AuditStore, client: AsyncWebClient, plan_id: str, inventory: Inventory) -> None:
    pending = await approvals.get(audit, plan_id)
    await asyncio.sleep(max(0.0, pending.expires_at - time.time()) + 0.05)
    if await approvals.expire_if_due(audit, plan_id) is not None:
        await show_expired(audit, client, inventory, plan_id)


async def show_expired(audit: AuditStore, client: AsyncWebClient, inventory: Inventory, plan_id: str) -> None:
    pending = await approvals.get(audit, plan_id)
    await approvals.close_unapplied(audit, plan_id, "proofbot", "expired", "no decision before the plan expired")
    if pending.channel and pending.message_ts:
        status = f":hourglass: expired at {pending.expires_at_utc()} with no decision; nothing was changed"
        text, blocks = decided(inventory, pending, status)
        await client.chat_update(channel=pending.channel, ts=pending.message_ts, text=text, blocks=blocks)


async def decide_click(inventory: Inventory, audit: AuditStore, body: dict[str, object],
                       reject_action: str) -> approvals.PendingPlan:
    """Record the click's decision, or raise Refused (already decided, expired, not allowed)."""
    action = body["actions"][0]  # type: ignore[index]
    user = body["user"]["id"]  # type: ignore[index]
    decision: approvals.Decision = "rejected" if action["action_id"] == reject_action else "approved"
    return await approvals.decide(audit, str(action["value"]), f"slack:{user}", decision, inventory.approvals,
                                  user_id=str(user))
