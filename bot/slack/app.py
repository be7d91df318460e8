"""The Slack app (slack-bolt, async): one listener per registry operation and button, one error handler.

Listeners ack first (after checks that are pure and instant), call one function, and
render with the ``bot.slack.*_blocks`` modules. Anything raised reaches ``on_error``, which answers the
user ephemerally and audits refusals (README "Slack").
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_bolt import BoltResponse
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.metrics import RateLimitCounting
from bot.slack import audit, policy_command, restart, restore, verify
from bot.slack.blocks import error_message, escape, slack_date
from bot.slack.home import HomeState, on_home_opened, on_member_joined
from bot.slack.home_blocks import help_message
from bot.slack.listening import Body, BotContext, Listener, SlackCommand
from bot.slack.modal_blocks import REASON_BLOCK, REJECT_REASON_VIEW
from bot.slack.once import handled_once, release_if_unstarted
from bot.slack.plans import on_reject_reason
from bot.slack.redacting import RedactingWebClient
from commands.errors import CouldNotRecord, ProofbotError
from commands.inflight import SHOWN_MAX
from commands.operation import Origin
from commands.redact import redact
from commands.registry import OPERATIONS
from commands.store.kinds import Refusal
from commands.store.log import audit_log

log = logging.getLogger("proofbot.slack")

COMMANDS: dict[str, SlackCommand] = {c.name: c for c in (verify.COMMAND, restore.COMMAND, restart.COMMAND,
                                                         audit.COMMAND, policy_command.COMMAND)}
if set(COMMANDS) != {spec.name for spec in OPERATIONS}:  # the registry is the list; Slack follows it
    raise ImportError(f"Slack commands {sorted(COMMANDS)} differ from the registry's operations")


def build_app(context: BotContext, *, bot_token: str, signing_secret: str | None = None,
              api_url: str | None = None, session: aiohttp.ClientSession | None = None) -> AsyncApp:
    """``session``: serve's (bot/slack/session.py), shared by every client made from the app's (bolt's per-request
    ones, the redacting copies), so calls reuse its connections; without one slack_sdk opens one per call."""
    # Threads post one reply per check: on a 429 wait as Slack says (Retry-After) and go on.
    retry = [RateLimitCounting(max_retry_count=3),  # counts each 429 for serve's metrics
             AsyncConnectionErrorRetryHandler()]
    client = (RedactingWebClient(token=bot_token, base_url=api_url, retry_handlers=retry, session=session) if api_url
              else RedactingWebClient(token=bot_token, retry_handlers=retry, session=session))
    app = AsyncApp(client=client, signing_secret=signing_secret or "",
                   request_verification_enabled=signing_secret is not None)
    bot = context  # bolt hands listeners its own `context` by that name

    @app.middleware
    async def redacting_client(context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        # Every listener's `client` is the per-request one bolt makes: make it the redacting kind.
        context["client"] = RedactingWebClient.like(context.client)
        await next()
    app.middleware(handled_once(context))  # a retry, or a second replica's delivery, starts nothing
    for spec in OPERATIONS:
        command = COMMANDS[spec.name]
        app.command(f"/{spec.name}")(_command_listener(context, command))
        for action_id, listener in command.actions.items():
            app.action(action_id)(_action_listener(context, listener))
        if command.approvable is not None:
            context.approvables[spec.name] = command.approvable
        for approvable in command.more_approvables:
            context.approvables[approvable.plan_type.operation] = approvable
    app.view(REJECT_REASON_VIEW)(_action_listener(context, on_reject_reason))
    home = HomeState()

    @app.event("app_home_opened")
    async def on_home(event: Body, client: AsyncWebClient) -> None:
        context.listening()
        await on_home_opened(context, home, event, client)

    @app.event("member_joined_channel")
    async def on_joined(event: Body, client: AsyncWebClient, context: AsyncBoltContext) -> None:
        bot.listening()
        await on_member_joined(bot, context.bot_user_id, event, client)

    @app.error
    async def on_error(error: Exception, body: dict[str, Any], respond: AsyncRespond | None,
                       client: AsyncWebClient, response: BoltResponse | None) -> BoltResponse | None:
        in_modal = body.get("type") == "view_submission"
        if isinstance(error, CouldNotRecord):  # nothing more can be audited now: say so, claim nothing
            log.warning("could not record: %s", error)
            said = f"{error.message}. {error.hint}"
            text = error_message("proofbot could not record this in its audit log",
                                 escape(f"{error.message}. {error.hint}"))
        elif isinstance(error, ProofbotError):
            action = (body.get("actions") or [{}])[0]
            user = body.get("user_id") or body.get("user", {}).get("id", "?")
            submitted = _metadata(body) if in_modal else {}
            operation = (body.get("command", "").lstrip("/") or action.get("action_id")
                         or body.get("view", {}).get("callback_id"))
            origin = Origin(f"slack:{user}", "slack", body.get("channel_id") or body.get("channel", {}).get("id")
                            or submitted.get("channel"))
            text = body.get("text") or ""
            await audit_log(context.audit, operation, action.get("value") or submitted.get("plan"),
                            actor=origin.actor).refused(Refusal(
                str(error), requested_host=text.split()[0] if text.split() else None, origin=origin.to_json(),
                text=body.get("text"), running=getattr(error, "running", None) or None))
            said = f"{error.message}. {error.hint}"
            text = error_message(getattr(error, "headline", error.message),  # `running` is listed below it
                                 error.hint + await _link_to_holder(client, error))
        else:
            log.exception("listener failed", exc_info=error)
            said = f"proofbot hit an internal error ({type(error).__name__}): nothing was decided"
            text = error_message(f"proofbot hit an internal error ({type(error).__name__})",
                                 "nothing further ran; the details are in the bot's log")
        await release_if_unstarted(context, body)  # after a refusal's audit: a refused delivery stays claimed
        if in_modal and response is not None:  # shown in the modal, under the reason box (plain text)
            return BoltResponse(status=200, body={"response_action": "errors",
                                                  "errors": {REASON_BLOCK: redact(said)[:2000]}})
        is_click = body.get("type") == "block_actions" or in_modal
        if response is not None and not is_click:  # not acknowledged yet: the ack carries the reply
            return BoltResponse(status=200, body={"response_type": "ephemeral", "text": text})
        if respond is not None and not in_modal:  # a modal has no response_url
            await respond(text=text, response_type="ephemeral", replace_original=False)
        elif body.get("channel_id") and body.get("user_id"):
            await client.chat_postEphemeral(channel=body["channel_id"], user=body["user_id"], text=text)
        return BoltResponse(status=200, body="") if response is not None else None

    return app


def _command_listener(context: BotContext, command: SlackCommand) -> Any:
    # Validation is pure and instant, so it runs before ack(): a refusal then becomes the
    # ack's own ephemeral reply. (bolt drops an ack when the listener raises right after it.)
    async def listener(ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
        context.listening()
        context.check_channel(body["channel_id"])  # help too: it lists the hosts
        text = body.get("text", "").strip()
        if text.lower() == "help" or (not text and command.empty_text_is_help):
            await ack(text=help_message(sorted(context.inventory.hosts)), response_type="ephemeral")
            return
        await command.on_command(context, ack, body, client)
    return listener


def _action_listener(context: BotContext, on_click: Listener) -> Any:
    async def listener(ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
        context.listening()
        await on_click(context, ack, body, client)
    return listener


def _metadata(body: Body) -> dict[str, Any]:
    try:
        value = json.loads(body.get("view", {}).get("private_metadata") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def _link_to_holder(client: AsyncWebClient, error: Exception) -> str:
    """For a busy host: a link to the thread of the operation that holds it. For a request refused by
    ``commands.inflight`` (the same work running, or over a limit): each running one, who, since, its thread."""
    running = getattr(error, "running", None) or []
    if running:
        lines = await asyncio.gather(*(_running_line(client, entry) for entry in running[:SHOWN_MAX]))
        more = [f"… and {len(running) - SHOWN_MAX} more"] if len(running) > SHOWN_MAX else []
        return "\n" + "\n".join([*lines, *more])
    holder = getattr(error, "holder", None) or {}
    if not holder.get("channel") or not holder.get("thread_ts"):
        return ""
    link = await client.chat_getPermalink(channel=holder["channel"], message_ts=holder["thread_ts"])
    return f"\n<{link['permalink']}|the running operation>"


async def _running_line(client: AsyncWebClient, entry: dict[str, Any]) -> str:
    actor = str(entry.get("user") or "?")
    who = f"<@{actor.removeprefix('slack:')}>" if actor.startswith("slack:") else f"`{escape(actor)}`"
    line = f"• {escape(str(entry.get('what')))} by {who} since {slack_date(str(entry.get('since')))}"
    if not entry.get("channel") or not entry.get("thread_ts"):
        return line + " (its thread is being posted)"
    try:
        link = await client.chat_getPermalink(channel=entry["channel"], message_ts=entry["thread_ts"])
    except SlackApiError as exc:  # the refusal still names it; only the link is missing
        log.warning("no permalink for a running operation: %s", exc.response.get("error"))
        return line
    return f"{line} — <{link['permalink']}|its thread>"
