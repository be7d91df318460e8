"""On bot start: tell each interrupted operation's thread what is known, re-arm pending plans; on PostgreSQL,
every lease renewal period, the same for a dead replica's operations and plans (``take_over_leases``).

Each interrupted thread gets the last step recorded and a "Verify now" button, because
after a crash nothing is known about what happened on the host since.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.audit_blocks import interrupted_message, interrupted_parent_message, interrupted_plan_status
from bot.slack.blocks import Message
from bot.slack.listening import BotContext
from bot.slack.plans import arm_expiry, show_expired
from bot.slack.posting import edit, post
from commands import observe
from commands.errors import ProofbotError, Refused
from commands.store import approvals
from commands.store.leases import RENEW_EVERY_S
from commands.store.recovery import Interrupted, recover, take_over
from commands.vocabulary import EventKind

log = logging.getLogger("proofbot.recovery")
SLACK_CALL_S = 15.0  # each post or update; the client's own timeout is per HTTP attempt, retries included


async def recover_in_slack(context: BotContext, client: AsyncWebClient) -> list[Interrupted]:
    interrupted, pending = await recover(context.audit)
    await _tell(context, client, interrupted)
    for plan in pending:
        if plan.expires_at <= time.time():
            if await approvals.expire_if_due(context.audit, plan.id) is not None:
                await show_expired(context, client, plan.id)
            continue
        arm_expiry(context, client, plan.id)
    return interrupted


async def _tell(context: BotContext, client: AsyncWebClient, interrupted: list[Interrupted]) -> None:
    """Each interrupted operation's thread is told what is known, and its parent message (left on its last
    progress line) says interrupted: one call each, bounded; a Slack failure is logged, the next one goes on."""
    for op in interrupted:
        if not op.channel or not op.thread_ts or op.fleet_operation_id:  # a fleet's part: the fleet says it
            continue
        text, blocks = interrupted_message(op)
        await _one_call(op, "post in the thread of", post(client, op.channel, text, blocks, thread_ts=op.thread_ts))
        try:
            text, blocks = await parent_message(context, op)
        except Exception as exc:  # the store away again, or a plan unreadable: the short notice, and go on
            log.warning("could not show the plan of %s again: %s", op.operation_id, exc)
            text, blocks = interrupted_parent_message(op)
        await _one_call(op, "update the parent message of", edit(client, op.channel, op.thread_ts, text, blocks))


async def parent_message(context: BotContext, op: Interrupted) -> Message:
    """An approved plan's parent keeps the plan as shown (what was planned, who asked), with who approved it and
    that it was interrupted; an operation without a plan (a verify), or whose plan no longer rebuilds against
    today's inventory, gets the short notice."""
    try:
        pending = await approvals.get(context.audit, op.operation_id)
    except Refused:  # no plan: a verify
        return interrupted_parent_message(op)
    approvable = context.approvables.get(pending.operation)
    if approvable is None:
        return interrupted_parent_message(op)
    events = await context.audit.events_of(op.operation_id)
    approved = next((e.details for e in events if e.kind == EventKind.APPROVED and isinstance(e.details, dict)), {})
    approvers = [str(a) for a in approved.get("approvals") or []] or [pending.decided_by or ""]
    status = interrupted_plan_status(op, [a for a in approvers if a], pending.decided_at)
    try:
        _, blocks = approvable.decided_for(context.inventory, pending, status)
    except ProofbotError as exc:  # the inventory changed since: the plan cannot be shown as it was
        log.info("interrupted %s: its plan is not shown again (%s)", op.operation_id, exc)
        return interrupted_parent_message(op)
    return interrupted_parent_message(op)[0], blocks


async def _one_call(op: Interrupted, what: str, call: Awaitable[object]) -> None:
    try:
        async with asyncio.timeout(SLACK_CALL_S):
            await call
    except SlackApiError as exc:
        log.warning("could not %s %s: %s", what, op.operation_id, exc.response.get("error"))
    except (TimeoutError, aiohttp.ClientError) as exc:
        log.warning("could not %s %s: %s", what, op.operation_id, str(exc) or type(exc).__name__)


async def take_over_leases(context: BotContext, client: AsyncWebClient, every_s: float = RENEW_EVERY_S) -> None:
    """Until cancelled: each turn, a dead replica's operations (their lease ended) are marked interrupted and told
    in their threads, and its pending plans adopted (their expiry re-armed here). A failed turn is logged and the
    next one tries again (the database may be restarting)."""
    while True:
        await asyncio.sleep(every_s)
        try:
            interrupted, adopted = await take_over(context.audit)
        except Exception as exc:  # any store failure: the next turn retries
            log.warning("could not take over expired leases: %s", exc)
            continue
        for _ in [*interrupted, *adopted]:
            observe.lease_taken_over()
        await _tell(context, client, interrupted)
        for plan in adopted:
            arm_expiry(context, client, str(plan["id"]))
