"""Plans awaiting approval in Slack, whatever the operation: the click, the rejection, expiry timers.

A click is decided before ack (one DB transaction) so a refusal reaches the clicker; the
plan is then rebuilt once and handed to the operation's own ``apply_in_thread``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.context import Approvable, Body, BotContext, Click
from commands.errors import PlanVoid
from commands.store import approvals


async def on_decision(context: BotContext, approvable: Approvable[Any], ack: AsyncAck, body: Body,
                      client: AsyncWebClient) -> None:
    """Approve or Reject on a plan: record the decision (or raise Refused), then apply or close it."""
    action, user = body["actions"][0], body["user"]["id"]
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    context.check_channel(str(channel))
    decision: approvals.Decision = "rejected" if action["action_id"] == approvable.reject_action else "approved"
    clicked_on = approvals.ClickedOn(approvable.plan_type.operation, channel,
                                     (body.get("container") or {}).get("message_ts")
                                     or (body.get("message") or {}).get("ts"))
    decided = await approvals.decide(context.audit, str(action["value"]), f"slack:{user}", decision,
                                     context.inventory.approvals, user_id=str(user), clicked_on=clicked_on)
    await ack()
    click = Click.of(body, decided)
    try:
        plan = approvable.plan_type.load(context.inventory, decided)
    except PlanVoid as void:
        await approvals.close_unapplied(context.audit, decided.id, "proofbot", "void", void.message)
        await client.chat_update(channel=click.channel, ts=click.ts,
                                 text=f"{decided.operation} plan void: {void.message}", blocks=[])
        raise
    if decided.state == "rejected":
        await approvals.close_unapplied(context.audit, decided.id, f"slack:{user}", "rejected", "rejected in Slack")
        status = f":no_entry_sign: rejected by <@{user}> at {decided.decided_at}; {approvable.nothing_done}"
        text, blocks = approvable.decided_message(plan, click.requester, status)
        await client.chat_update(channel=click.channel, ts=click.ts, text=text, blocks=blocks)
        return
    await approvable.apply_in_thread(context, client, click, plan)


def arm_expiry(context: BotContext, client: AsyncWebClient, plan_id: str) -> None:
    timer = asyncio.create_task(_expire_later(context, client, plan_id))
    context.timers.add(timer)
    timer.add_done_callback(context.timers.discard)


async def _expire_later(context: BotContext, client: AsyncWebClient, plan_id: str) -> None:
    pending = await approvals.get(context.audit, plan_id)
    await asyncio.sleep(max(0.0, pending.expires_at - time.time()) + 0.05)
    if await approvals.expire_if_due(context.audit, plan_id) is not None:
        await show_expired(context, client, plan_id)


async def show_expired(context: BotContext, client: AsyncWebClient, plan_id: str) -> None:
    """Close an expired plan and take the buttons off its message."""
    pending = await approvals.get(context.audit, plan_id)
    await approvals.close_unapplied(context.audit, plan_id, "proofbot", "expired",
                                    "no decision before the plan expired")
    approvable = context.approvables[pending.operation]
    if pending.channel and pending.message_ts:
        status = (f":hourglass: expired at {pending.expires_at_utc()} with no decision; "
                  f"{approvable.nothing_done}")
        text, blocks = approvable.decided_for(context.inventory, pending, status)
        await client.chat_update(channel=pending.channel, ts=pending.message_ts, text=text, blocks=blocks)
