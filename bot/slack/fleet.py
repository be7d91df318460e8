"""``/verify GROUP`` (or several hosts) in Slack: one parent updated in place as hosts finish, then
the grouped verdict, one reply per group that did not pass, and the per-host table as a file.

Slack allows about one message a second a channel and a few edits a second: the thread's messages go
through the channel's outbox at Slack's pace, its parent's progress is coalesced, newest wins
(bot/slack/thread.py, bot/slack/outbox.py).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from slack_sdk.web.async_client import AsyncWebClient

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
from bot.slack.posting import upload
from bot.slack.thread import OperationThread
from commands.fleet.deadline import fleet_deadline_s
from commands.fleet.grouping import group_outcomes, outcome_of
from commands.inflight import Ticket
from commands.operation import OperationResult, Origin
from commands.verify.fleet import FleetRequest, FleetResult, verify_fleet
from commands.vocabulary import Outcome


async def verify_fleet_in_thread(context: BotContext, client: AsyncWebClient, command: Body,
                                 request: FleetRequest, ticket: Ticket) -> FleetResult:
    user = command["user_id"]
    operation_id = request.operation_id
    total = len(request.plan.plans)
    counts: Counter[str] = Counter()
    thread = await OperationThread.open(client, command["channel_id"], fleet_progress_message(
        operation_id, request.target, user, total, counts))
    channel, ts = thread.channel, thread.ts
    ticket.at(channel, ts, operation_id)

    async def on_host_done(result: OperationResult) -> None:
        counts[outcome_of(result)] += 1
        thread.update(fleet_progress_message(operation_id, request.target, user, total, counts))

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
        await thread.abandon()
        raise
    addresses = {plan.host.name: plan.host.address for plan in request.plan.plans}
    await post_outcome(thread, fleet, FleetView(user, request.plan.without_backup, addresses))
    return fleet


async def post_outcome(thread: OperationThread, fleet: FleetResult, view: FleetView) -> None:
    """The grouped verdict on the parent, then a reply per group that did not pass (at most GROUP_REPLIES),
    and the per-host table when the fleet is large or groups were left out of the thread."""
    groups = await asyncio.to_thread(group_outcomes, fleet.results, dict(view.addresses))
    await thread.finish(fleet_verdict_message(fleet, groups, view))
    failing = [group for group in groups if group.outcome != Outcome.PASS]
    with_file = attaches_file(fleet, groups)
    by_host = {result.host: result for result in fleet.results}
    replies = [thread.reply(group_reply_message(group, index, len(failing), by_host, with_file))
               for index, group in enumerate(failing[:GROUP_REPLIES], start=1)]
    if len(failing) > GROUP_REPLIES:
        replies.append(thread.reply(more_groups_message(failing[GROUP_REPLIES:])))
    if with_file:
        table = await asyncio.to_thread(fleet_table, fleet)
        slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in fleet.target)[:40]
        await upload(thread.client, thread.channel, thread.ts, content=table,  # after the replies queued above
                     filename=f"verify-{slug}-{fleet.operation_id}.txt",
                     title=f"verify {fleet.target}: every host ({len(fleet.results)})", request_file_info=False)
    await asyncio.gather(*replies, return_exceptions=True)  # each refusal logged as it came
