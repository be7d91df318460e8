"""Plans awaiting approval in Slack, whatever the operation: the click, the rejection, expiry timers.

An Approve click is decided before ack (one DB transaction) so a refusal reaches the clicker;
the plan is then rebuilt once and handed to the operation's own ``apply_in_thread``. A Reject
click is judged by the same rules (a read), then opens a modal asking why; the submitted reason
is decided through the same transaction (every rule judged again: a plan that expired or was
decided meanwhile is refused in the modal), audited with the ``rejected`` event and shown on
the plan and in its thread.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.listening import Approvable, Body, BotContext, Click
from bot.slack.modal_blocks import (
    REASON_BLOCK,
    REASON_INPUT,
    REASON_LIMIT,
    reject_modal,
    rejected_status,
    rejection_reply,
)
from bot.slack.policies import count_text, rule_for, with_count
from bot.slack.posting import edit, post
from commands.approvers import Rule
from commands.errors import PlanVoid, Refused
from commands.plans import load_decided
from commands.store import approvals
from commands.vocabulary import PlanState


async def on_decision(context: BotContext, approvable: Approvable[Any], ack: AsyncAck, body: Body,
                      client: AsyncWebClient) -> None:
    """Approve or Reject on a plan: record the decision (or raise Refused), then apply or close it."""
    action, user = body["actions"][0], body["user"]["id"]
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    context.check_channel(str(channel))
    clicked_on = approvals.ClickedOn(approvable.plan_type.operation, channel,
                                     (body.get("container") or {}).get("message_ts")
                                     or (body.get("message") or {}).get("ts"))
    if action["action_id"] == approvable.reject_action:
        await _ask_why(context, ack, body, client, clicked_on)
        return
    pending = await approvals.get(context.audit, str(action["value"]))
    rule = await rule_for(context, client, pending)  # a group Slack cannot resolve now: refused, never open
    # The apply is work in flight for the approver: refused over a limit before anything is decided.
    with context.start(str(user), pending.operation, [pending.host], plan_id=pending.id) as ticket:
        decided = await approvals.decide(context.audit, str(action["value"]), f"slack:{user}", PlanState.APPROVED,
                                         rule, user_id=str(user), clicked_on=clicked_on)
        if decided.state == PlanState.PENDING:  # counted; more approvals required
            await ack()
            await _show_count(context, client, body, decided, rule)
            return
        ticket.at(decided.channel or str(channel), decided.message_ts or str(clicked_on.message_ts), decided.id)
        await ack()
        click = Click.of(body, decided)
        plan = await _load(context, approvable, client, click)
        await approvable.apply_in_thread(context, client, click, plan)


async def _show_count(context: BotContext, client: AsyncWebClient, body: Body, decided: approvals.PendingPlan,
                      rule: Rule) -> None:
    """An approval counted, more required: said in the plan's thread, and on the plan's message above its
    buttons (the message as the click carried it: Slack sends its blocks)."""
    counted = await approvals.approval_count(context.audit, decided.id, rule)
    channel, ts = str(decided.channel), str(decided.message_ts)
    message = body.get("message") or {}
    if message.get("blocks"):
        await edit(client, channel, ts, str(message.get("text") or "plan"),
                   with_count(list(message["blocks"]), counted, rule.required))
    await post(client, channel, f":ballot_box_with_check: {count_text(counted, rule.required)}", thread_ts=ts)


async def _load(context: BotContext, approvable: Approvable[Any], client: AsyncWebClient, click: Click) -> Any:
    """The decided plan rebuilt from the inventory; a void one is closed, said on its message, and raised."""
    try:
        return await load_decided(approvable.plan_type, context.inventory, context.audit, click.decided)
    except PlanVoid as void:
        await edit(client, click.channel, click.ts, f"{click.decided.operation} plan void: {void.message}", [])
        raise


async def _ask_why(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient,
                   clicked_on: approvals.ClickedOn) -> None:
    """Reject: refused at once if this user may not reject this plan now, else a modal asking why."""
    plan_id, user = str(body["actions"][0]["value"]), str(body["user"]["id"])
    rule = await rule_for(context, client, await approvals.get(context.audit, plan_id))
    pending = await approvals.may_decide(context.audit, plan_id, f"slack:{user}", PlanState.REJECTED,
                                         rule, user_id=user, clicked_on=clicked_on)
    await ack()
    metadata = json.dumps({"plan": plan_id, "operation": clicked_on.operation, "channel": clicked_on.channel,
                           "message_ts": clicked_on.message_ts})
    await client.views_open(trigger_id=body["trigger_id"],
                            view=reject_modal(pending.operation, pending.host, plan_id, metadata))


async def on_reject_reason(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
    """The Reject modal's submission: decided like a click (all rules again), then shown and audited."""
    view, user = body["view"], str(body["user"]["id"])
    where = json.loads(view.get("private_metadata") or "{}")
    typed = (((view.get("state") or {}).get("values") or {}).get(REASON_BLOCK) or {}).get(REASON_INPUT) or {}
    reason = " ".join(str(typed.get("value") or "").split())[:REASON_LIMIT]
    if not reason:
        await ack(response_action="errors", errors={REASON_BLOCK: "Say why the plan is rejected."})
        return
    operation = str(where.get("operation"))
    approvable = context.approvables.get(operation)
    if approvable is None:
        raise Refused(f"not decided: no {operation!r} plans here")
    clicked_on = approvals.ClickedOn(operation, where.get("channel"), where.get("message_ts"))
    rule = await rule_for(context, client, await approvals.get(context.audit, str(where.get("plan"))))
    decided = await approvals.decide(context.audit, str(where.get("plan")), f"slack:{user}", PlanState.REJECTED,
                                     rule, user_id=user, clicked_on=clicked_on,
                                     reason=reason)
    await ack()
    click = Click(user, approvable.reject_action, decided, decided.channel or str(clicked_on.channel),
                  decided.message_ts or str(clicked_on.message_ts))
    plan = await _load(context, approvable, client, click)  # the rejection ended it (commands.store.approvals)
    status = rejected_status(user, decided.decided_at, reason, approvable.nothing_done)
    text, blocks = approvable.decided_message(plan, click.requester, status)
    await edit(client, click.channel, click.ts, text, blocks)
    text, blocks = rejection_reply(user, reason)
    await post(client, click.channel, text, blocks, thread_ts=click.ts)


def arm_expiry(context: BotContext, client: AsyncWebClient, plan_id: str) -> None:
    context.keep(asyncio.create_task(_expire_later(context, client, plan_id)))


async def _expire_later(context: BotContext, client: AsyncWebClient, plan_id: str) -> None:
    pending = await approvals.get(context.audit, plan_id)
    await asyncio.sleep(max(0.0, pending.expires_at - time.time()) + 0.05)
    if await approvals.expire_if_due(context.audit, plan_id) is not None:
        await show_expired(context, client, plan_id)


async def show_expired(context: BotContext, client: AsyncWebClient, plan_id: str) -> None:
    """Take the buttons off an expired plan's message (the expiry ended it: commands.store.approvals)."""
    pending = await approvals.get(context.audit, plan_id)
    approvable = context.approvables[pending.operation]
    if pending.channel and pending.message_ts:
        status = (f":hourglass: expired at {pending.expires_at_utc()} with no decision; "
                  f"{approvable.nothing_done}")
        text, blocks = approvable.decided_for(context.inventory, pending, status)
        await edit(client, pending.channel, pending.message_ts, text, blocks)
