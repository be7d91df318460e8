"""The Slack app (slack-bolt, async): thin listeners, one error handler, the registry's commands.

Listeners ack first, call one function, and render with ``bot.blocks``. Anything raised
reaches ``on_error``, which answers the user ephemerally and audits refusals.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from slack_bolt import BoltResponse
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.audit import audit_in_thread, audit_request
from bot.slack.blocks import (
    RESTART_APPROVE,
    RESTART_NOW,
    RESTART_REJECT,
    RESTORE_APPROVE,
    RESTORE_APPROVE_WITH_EXTRAS,
    RESTORE_REJECT,
    error_message,
    finding_message,
    help_message,
    progress_message,
    verdict_message,
)
from bot.slack.plans import decide_click
from bot.slack.recovery import VERIFY_NOW, command_for_click
from bot.slack.restart import plan_restart_in_thread, restart_in_thread, restart_request
from bot.slack.restore import apply_in_thread, plan_in_thread, restore_request
from bot.slack.thread import OperationThread
from commands.errors import ProofbotError, Refused, UsageError
from commands.findings import Finding
from commands.inventory import Inventory
from commands.operation import Origin
from commands.store.events import AuditStore
from commands.verify.run import VerifyPlan, verify

log = logging.getLogger("proofbot.slack")


@dataclass(frozen=True)
class BotContext:
    inventory: Inventory
    audit: AuditStore
    timers: set[asyncio.Task[None]] = field(default_factory=set)


def build_app(context: BotContext, *, bot_token: str, signing_secret: str | None = None,
              api_url: str | None = None) -> AsyncApp:
    # Threads post one reply per check: on a 429 wait as Slack says (Retry-After) and go on.
    retry = [AsyncRateLimitErrorRetryHandler(max_retry_count=3), AsyncConnectionErrorRetryHandler()]
    client = (AsyncWebClient(token=bot_token, base_url=api_url, retry_handlers=retry) if api_url
              else AsyncWebClient(token=bot_token, retry_handlers=retry))
    app = AsyncApp(client=client, signing_secret=signing_secret or "",
                   request_verification_enabled=signing_secret is not None)

    # Validation is pure and instant, so it runs before ack(): a refusal then becomes the
    # ack's own ephemeral reply. (bolt drops an ack when the listener raises right after it.)
    @app.command("/verify")
    async def on_verify(ack: AsyncAck, command: dict[str, Any], client: AsyncWebClient) -> None:
        words = command.get("text", "").split()
        if not words or words[0].lower() == "help":
            await ack(text=help_message(sorted(context.inventory.hosts)), response_type="ephemeral")
            return
        plan = verify_plan(context.inventory, command)
        await ack()
        await verify_in_thread(context, client, command, plan)

    @app.command("/audit")
    async def on_audit(ack: AsyncAck, command: dict[str, Any], client: AsyncWebClient) -> None:
        if command.get("text", "").strip().lower() == "help":
            await ack(text=help_message(sorted(context.inventory.hosts)), response_type="ephemeral")
            return
        check_channel(context.inventory, command["channel_id"])
        request = audit_request(context.inventory, command.get("text", ""))
        await ack()
        await audit_in_thread(client, context.audit, command, request)

    @app.command("/restore")
    async def on_restore(ack: AsyncAck, command: dict[str, Any], client: AsyncWebClient) -> None:
        if command.get("text", "").strip().lower() in ("", "help"):
            await ack(text=help_message(sorted(context.inventory.hosts)), response_type="ephemeral")
            return
        check_channel(context.inventory, command["channel_id"])
        request = await restore_request(context.inventory, context.audit, command)
        await ack()
        await plan_in_thread(context.inventory, context.audit, client, command, request, context.timers)

    @app.command("/restart")
    async def on_restart(ack: AsyncAck, command: dict[str, Any], client: AsyncWebClient) -> None:
        if command.get("text", "").strip().lower() in ("", "help"):
            await ack(text=help_message(sorted(context.inventory.hosts)), response_type="ephemeral")
            return
        check_channel(context.inventory, command["channel_id"])
        host = await restart_request(context.inventory, context.audit, command)
        await ack()
        await plan_restart_in_thread(context.inventory, context.audit, client, command["user_id"],
                                     command["channel_id"], host, context.timers)

    @app.action(re.compile(f"^({RESTART_APPROVE}|{RESTART_REJECT})$"))
    async def on_restart_decision(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        pending = await decide_click(context.inventory, context.audit, body, RESTART_REJECT)
        await ack()
        await restart_in_thread(context.inventory, context.audit, client, body, pending)

    @app.action(re.compile(f"^({RESTORE_APPROVE}|{RESTORE_APPROVE_WITH_EXTRAS}|{RESTORE_REJECT})$"))
    async def on_restore_decision(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        pending = await decide_click(context.inventory, context.audit, body, RESTORE_REJECT)
        await ack()
        await apply_in_thread(context.inventory, context.audit, client, body, pending)

    @app.action(RESTART_NOW)
    async def on_restart_now(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        command = await command_for_click(context.audit, body)
        host = await restart_request(context.inventory, context.audit, command)
        await ack()
        await plan_restart_in_thread(context.inventory, context.audit, client, command["user_id"],
                                     command["channel_id"], host, context.timers)

    @app.action(VERIFY_NOW)
    async def on_verify_now(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        command = await command_for_click(context.audit, body)
        plan = verify_plan(context.inventory, command)
        await ack()
        await verify_in_thread(context, client, command, plan)

    @app.error
    async def on_error(error: Exception, body: dict[str, Any], respond: AsyncRespond | None,
                       client: AsyncWebClient, response: BoltResponse | None) -> BoltResponse | None:
        if isinstance(error, ProofbotError):
            action = (body.get("actions") or [{}])[0]
            user = body.get("user_id") or body.get("user", {}).get("id", "?")
            await context.audit.append(
                "refused", operation=body.get("command", "").lstrip("/") or action.get("action_id"),
                operation_id=action.get("value"), actor=f"slack:{user}",
                details={"reason": str(error), "text": body.get("text"),
                         "channel": body.get("channel_id") or body.get("channel", {}).get("id")},
            )
            text = error_message(error.message, error.hint + await _link_to_holder(client, error))
        else:
            log.exception("listener failed", exc_info=error)
            text = error_message(f"proofbot hit an internal error ({type(error).__name__})",
                                 "nothing further ran; the details are in the bot's log")
        is_click = body.get("type") == "block_actions"
        if response is not None and not is_click:  # not acknowledged yet: the ack carries the reply
            return BoltResponse(status=200, body={"response_type": "ephemeral", "text": text})
        if respond is not None:
            await respond(text=text, response_type="ephemeral", replace_original=False)
        elif body.get("channel_id") and body.get("user_id"):
            await client.chat_postEphemeral(channel=body["channel_id"], user=body["user_id"], text=text)
        return BoltResponse(status=200, body="") if response is not None else None

    return app


async def _link_to_holder(client: AsyncWebClient, error: Exception) -> str:
    """For a busy host: a link to the thread of the operation that holds it."""
    holder = getattr(error, "holder", None) or {}
    if not holder.get("channel") or not holder.get("thread_ts"):
        return ""
    link = await client.chat_getPermalink(channel=holder["channel"], message_ts=holder["thread_ts"])
    return f"\n<{link['permalink']}|the running operation>"


def check_channel(inventory: Inventory, channel: str) -> None:
    if inventory.channels is not None and channel not in inventory.channels:
        allowed = ", ".join(f"<#{c}>" for c in inventory.channels)
        raise Refused("proofbot does not take commands in this channel", hint=f"use {allowed}")


def verify_plan(inventory: Inventory, command: dict[str, Any]) -> VerifyPlan:
    """/verify HOST [BACKUP] checked against the channel list and the inventory, or refused."""
    check_channel(inventory, command["channel_id"])
    words = command.get("text", "").split()
    if len(words) > 2:
        raise UsageError("usage: /verify HOST [BACKUP]", hint="or /verify help")
    return VerifyPlan.for_host(inventory.host(words[0]), words[1] if len(words) > 1 else None)


async def verify_in_thread(context: BotContext, client: AsyncWebClient, command: dict[str, Any],
                           plan: VerifyPlan) -> None:
    """Run a verify as a thread: parent message, one reply per check, verdict on the parent."""
    user = command["user_id"]
    channel = command["channel_id"]
    planned = plan.check_names()
    thread = await OperationThread.open(client, channel, progress_message("verify", plan.host.name, user, planned, []))
    seen: list[Finding] = []

    async def on_finding(finding: Finding) -> None:
        seen.append(finding)
        thread.reply(finding_message(finding))
        thread.update(progress_message("verify", plan.host.name, user, planned, seen))

    origin = Origin(actor=f"slack:{user}", via="slack", channel=thread.channel, thread_ts=thread.ts)
    try:
        result = await verify(plan, origin=origin, audit=context.audit, on_finding=on_finding)
    except BaseException:
        await thread.abandon()
        raise
    await thread.finish(verdict_message(result, user, plan.backup_name))
    await thread.post_summary(context.audit, result.operation_id)
