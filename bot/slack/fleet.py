"""``/verify GROUP`` (or several hosts) in Slack: one parent updated in place as hosts finish, then
the grouped verdict, one reply per group that did not pass, and the per-host table as a file.

Slack allows about one message a second a channel and a few edits a second: every call of a
fleet thread goes through one ``Paced`` gate (each starts a second after the previous one
ended, so Slack's own clock sees at least that gap), and progress is coalesced, newest wins.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Message
from bot.slack.fleet_blocks import (
    GROUP_REPLIES,
    FleetView,
    attaches_file,
    fleet_progress_message,
    fleet_table,
    fleet_verdict_message,
    group_reply_message,
    more_groups_message,
)
from bot.slack.listening import Body, BotContext
from commands.fleet.deadline import fleet_deadline_s
from commands.fleet.grouping import group_outcomes, outcome_of
from commands.inflight import Ticket
from commands.operation import OperationResult, Origin
from commands.verify.fleet import FleetRequest, FleetResult, verify_fleet
from commands.vocabulary import Outcome

log = logging.getLogger("proofbot.slack")
T = TypeVar("T")
CALL_INTERVAL_S = 1.0


class Paced:
    """Slack calls into one channel, each starting ``interval_s`` after the previous one ended."""

    def __init__(self, interval_s: float = CALL_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._lock = asyncio.Lock()
        self._last_end = float("-inf")

    async def run(self, call: Callable[[], Awaitable[T]]) -> T:
        async with self._lock:
            delay = self._last_end + self.interval_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                return await call()
            finally:
                self._last_end = time.monotonic()


class ParentProgress:
    """Progress on the parent: the newest message wins; a message shown while an edit is on its way
    goes out in the next paced slot, so the parent never stays behind for long."""

    def __init__(self, client: AsyncWebClient, paced: Paced, channel: str, ts: str) -> None:
        self._client, self._paced, self._channel, self._ts = client, paced, channel, ts
        self._latest: Message | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._task = asyncio.create_task(self._run())

    def show(self, message: Message) -> None:
        self._latest = message
        self._wake.set()

    async def close(self) -> None:
        """Stop; what is still pending is dropped (the final message replaces it)."""
        self._closing = True
        self._wake.set()
        await self._task

    async def abandon(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            await self._paced.run(self._send_latest)

    async def _send_latest(self) -> None:
        message, self._latest = self._latest, None
        if message is None or self._closing:
            return
        try:
            await self._client.chat_update(channel=self._channel, ts=self._ts, text=message[0], blocks=message[1])
        except SlackApiError as exc:  # progress is a courtesy: the verify goes on, the final edit still comes
            log.warning("fleet progress update failed: %s", exc.response.get("error"))


async def verify_fleet_in_thread(context: BotContext, client: AsyncWebClient, command: Body,
                                 request: FleetRequest, ticket: Ticket) -> FleetResult:
    user = command["user_id"]
    paced = Paced()
    operation_id = request.operation_id
    total = len(request.plan.plans)
    counts: Counter[str] = Counter()
    text, blocks = fleet_progress_message(operation_id, request.target, user, total, counts)
    posted = await paced.run(lambda: client.chat_postMessage(channel=command["channel_id"], text=text, blocks=blocks))
    channel, ts = str(posted["channel"]), str(posted["ts"])
    ticket.at(channel, ts, operation_id)
    progress = ParentProgress(client, paced, channel, ts)

    async def on_host_done(result: OperationResult) -> None:
        counts[outcome_of(result)] += 1
        progress.show(fleet_progress_message(operation_id, request.target, user, total, counts))

    origin = Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=ts)
    try:
        fleet = await verify_fleet(request.plan.plans, target=request.target, origin=origin, audit=context.audit,
                                   fleet=context.inventory.fleet, on_host_done=on_host_done,
                                   operation_id=operation_id, without_backup=request.plan.without_backup or None,
                                   host_slots=context.inflight.host_slots(),
                                   # its hosts draw from limits.hosts too: fewer at once, more rounds
                                   deadline_s=fleet_deadline_s(total, context.inventory.fleet.host_deadline_s, min(
                                       context.inventory.fleet.max_parallel, context.inventory.limits.hosts)))
    except BaseException:
        await progress.abandon()
        raise
    await progress.close()
    addresses = {plan.host.name: plan.host.address for plan in request.plan.plans}
    await post_outcome(client, paced, channel, ts, fleet, FleetView(user, request.plan.without_backup, addresses))
    return fleet


async def post_outcome(client: AsyncWebClient, paced: Paced, channel: str, ts: str, fleet: FleetResult,
                       view: FleetView) -> None:
    """The grouped verdict on the parent, a reply per group that did not pass (at most GROUP_REPLIES),
    and the per-host table when the fleet is large or groups were left out of the thread."""
    groups = await asyncio.to_thread(group_outcomes, fleet.results, dict(view.addresses))
    text, blocks = fleet_verdict_message(fleet, groups, view)
    await paced.run(lambda: client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks))

    async def reply(message: Message) -> None:
        await paced.run(lambda: client.chat_postMessage(channel=channel, thread_ts=ts, text=message[0],
                                                        blocks=message[1]))

    failing = [group for group in groups if group.outcome != Outcome.PASS]
    with_file = attaches_file(fleet, groups)
    by_host = {result.host: result for result in fleet.results}
    for index, group in enumerate(failing[:GROUP_REPLIES], start=1):
        await reply(group_reply_message(group, index, len(failing), by_host, with_file))
    if len(failing) > GROUP_REPLIES:
        await reply(more_groups_message(failing[GROUP_REPLIES:]))
    if with_file:
        table = await asyncio.to_thread(fleet_table, fleet)
        slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in fleet.target)[:40]
        await paced.run(lambda: client.files_upload_v2(
            channel=channel, thread_ts=ts, content=table, filename=f"verify-{slug}-{fleet.operation_id}.txt",
            title=f"verify {fleet.target}: every host ({len(fleet.results)})", request_file_info=False))
