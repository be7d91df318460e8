"""On bot start: tell each interrupted operation's thread what is known, re-arm pending plans.

Each interrupted thread gets the last step recorded and a "Verify now" button, because
after a crash nothing is known about what happened on the host since.
"""

from __future__ import annotations

import logging
import time

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.audit_blocks import interrupted_message
from bot.slack.listening import BotContext
from bot.slack.plans import arm_expiry, show_expired
from commands.store import approvals
from commands.store.recovery import Interrupted, recover

log = logging.getLogger("proofbot.recovery")


async def recover_in_slack(context: BotContext, client: AsyncWebClient) -> list[Interrupted]:
    interrupted, pending = await recover(context.audit)
    for op in interrupted:
        if not op.channel or not op.thread_ts or op.fleet_operation_id:  # a fleet's part: the fleet says it
            continue
        text, blocks = interrupted_message(op)
        try:
            await client.chat_postMessage(channel=op.channel, thread_ts=op.thread_ts, text=text, blocks=blocks)
        except SlackApiError as exc:
            log.warning("could not post in the thread of %s: %s", op.operation_id, exc.response.get("error"))
    for plan in pending:
        if plan.expires_at <= time.time():
            if await approvals.expire_if_due(context.audit, plan.id) is not None:
                await show_expired(context, client, plan.id)
            continue
        arm_expiry(context, client, plan.id)
    return interrupted
