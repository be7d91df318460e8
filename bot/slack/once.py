"""Each Slack delivery handled once across every replica: bolt middleware that claims a delivery
(commands/store/deliveries.py) before any listener runs; a retry (``X-Slack-Retry-Num``) or the same payload
delivered again, to this replica or another, is acked and starts nothing. A claim whose handling failed before
it wrote anything is released (``release_if_unstarted``, from the app's error handler), so a retry runs it.
Claims that arrive together share one transaction (``Claims``): an ack waits for one commit, not for each other's."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt import BoltResponse
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.slack.listening import BotContext
from commands.store.db import WRITES, AuditStore, WriteTally
from commands.store.deliveries import claim_all_in, release_unstarted

log = logging.getLogger("proofbot.slack")
# Payloads that may start something; the rest (url_verification, ssl_check, options) pass through unclaimed.
INTERACTIVE = ("block_actions", "view_submission", "shortcut", "message_action")
Middleware = Callable[..., Awaitable[BoltResponse | None]]
BATCH_MAX = 100  # claims in one transaction (one INSERT)


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


class Claims:
    """Group commit of delivery claims: while one transaction of claims is being written, the claims that arrive
    wait together and go in the next one. With 50 slash commands at once each used to be its own commit, one after
    the other on the store's claiming thread, and the last ack waited for 49 commits (1.9 s of a 2.1 s ack on a
    loaded machine, docs/benchmarks.md); now it waits for at most the one in flight and its own."""

    def __init__(self, store: Callable[[], AuditStore]) -> None:
        self._store = store
        self._pending: list[tuple[str, str, asyncio.Future[bool]]] = []
        self._writing: asyncio.Task[None] | None = None

    async def claim(self, delivery_id: str, kind: str) -> bool:
        """True if the delivery is new (claimed now), False if this or another replica claimed it before."""
        claimed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((delivery_id, kind, claimed))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write())
        return await claimed

    async def _write(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:BATCH_MAX], self._pending[BATCH_MAX:]
            wanted = [(delivery, kind) for delivery, kind, _ in batch]
            try:
                claimed = await self._store().write_apart(functools.partial(claim_all_in, deliveries=wanted))
            except Exception as exc:  # each waiter's own failure, as when it wrote alone (CouldNotRecord...)
                for _, _, waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(exc)
                continue
            for (_, _, waiter), new in zip(batch, claimed, strict=True):
                if not waiter.done():  # a waiter cancelled (serve stopping) has left
                    waiter.set_result(new)


def handled_once(context: BotContext) -> Middleware:
    claims = Claims(lambda: context.audit)

    async def once(req: AsyncBoltRequest, next: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        found = delivery_id(req.body)
        if found is not None and not await claims.claim(found[1], found[0]):
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
