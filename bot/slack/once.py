"""Each Slack delivery handled once across every replica: bolt middleware that claims a delivery
(commands/store/deliveries.py) before any listener runs; a retry (``X-Slack-Retry-Num``) or the same payload
delivered again, to this replica or another, is acked and starts nothing. A claim whose handling failed before
it wrote anything is released (``release_if_unstarted``, from the app's error handler), so a retry runs it."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt import BoltResponse
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.slack.listening import BotContext
from commands.store.db import WRITES, WriteTally
from commands.store.deliveries import claim, release_unstarted

log = logging.getLogger("proofbot.slack")
# Payloads that may start something; the rest (url_verification, ssl_check, options) pass through unclaimed.
INTERACTIVE = ("block_actions", "view_submission", "shortcut", "message_action")
Middleware = Callable[..., Awaitable[BoltResponse | None]]


def delivery_id(body: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, id) of a delivery: an event's own ``event_id``; a command's or a click's digest of its whole
    payload (its trigger_id, response_url and action_ts make each real one unique; a retry repeats them)."""
    if isinstance(body.get("event_id"), str):
        return "event", f"event:{body['event_id']}"
    kind = "command" if "command" in body else str(body.get("type", ""))
    if kind != "command" and kind not in INTERACTIVE:
        return None
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    return kind, f"{kind}:{digest}"


def handled_once(context: BotContext) -> Middleware:
    async def once(req: AsyncBoltRequest, next: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        found = delivery_id(req.body)
        if found is not None and not await claim(context.audit, found[1], found[0]):
            retry = (req.headers.get("x-slack-retry-num") or ["-"])[0]
            log.info("Slack delivered %s again (retry %s): acked, nothing started", found[1], retry)
            return BoltResponse(status=200, body="")
        if found is not None:
            WRITES.set(WriteTally())  # the listener's task copies this context: its writes count here
        await next()
        return None
    return once


async def release_if_unstarted(context: BotContext, body: dict[str, Any]) -> None:
    """The handling of ``body`` failed: if it wrote nothing after its claim, the claim goes, so Slack's retry (or
    the same payload again) runs it; once anything was written (the operation's request, a refusal), it stays."""
    found, tally = delivery_id(body), WRITES.get()
    if found is not None and tally is not None and await release_unstarted(context.audit, found[1], tally):
        log.info("released the claim of %s: its handling failed before anything was recorded", found[1])
