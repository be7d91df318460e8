"""``/restart HOST`` in Slack (and the "Restart now" button): a plan with Approve/Reject, then the
restart with live progress on the parent (at most every 2 s), each signal's evidence a reply.
``/restart GROUP`` is a rolling restart (``bot.slack.rollout``).
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import rollout
from bot.slack.blocks import as_dicts, escape, section_block
from bot.slack.listening import Approvable, Body, BotContext, Click, SlackCommand
from bot.slack.plans import arm_expiry, on_decision
from bot.slack.policies import shown_approvers
from bot.slack.posting import edit, post
from bot.slack.restart_blocks import (
    RESTART_APPROVE,
    RESTART_NOW,
    RESTART_REJECT,
    restart_plan_message,
    restart_status_message,
)
from bot.slack.thread import OperationThread
from bot.slack.thread_blocks import finding_message, verdict_message
from commands.errors import CouldNotRecord, PlanVoid, UsageError
from commands.findings import Finding
from commands.inflight import Ticket
from commands.inventory import Host
from commands.operation import Origin
from commands.restart import RestartPlan, RestartProgress, apply_restart, request_restart
from commands.restart.operation import admit_restart
from commands.store import approvals
from commands.vocabulary import CheckStatus, Operation

USAGE = "usage: /restart HOST or /restart GROUP"


async def on_command(context: BotContext, ack: AsyncAck, command: Body, client: AsyncWebClient) -> None:
    await _plan(context, ack, command, client)


async def on_restart_now(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
    command = await context.command_for_click(body)
    context.check_channel(command["channel_id"])
    await _plan(context, ack, command, client)


async def _plan(context: BotContext, ack: AsyncAck, command: Body, client: AsyncWebClient) -> None:
    """HOST or GROUP, admitted by the core before the ack (so a refusal is the answer), then planned."""
    words = command.get("text", "").split()
    if len(words) != 1:
        raise UsageError(USAGE, hint="or /verify help")
    request = await admit_restart(context.inventory, words[0], context.audit,
                                  Origin(f"slack:{command['user_id']}", "slack", command["channel_id"]))
    fleet = request.operation == Operation.ROLLOUT
    # the planning counts among the work in flight
    with context.start(command["user_id"], request.operation, list(request.hosts),
                       target=request.subject if fleet else "") as ticket:
        await ack()
        if fleet:
            await rollout.plan_in_thread(context, client, command, request, ticket)
        else:
            await plan_in_thread(context, client, command, context.inventory.hosts[request.subject], ticket)


async def plan_in_thread(context: BotContext, client: AsyncWebClient, command: Body, host: Host,
                         ticket: Ticket) -> None:
    user = command["user_id"]
    posted = await post(client, command["channel_id"], f"Planning a restart of {host.name} for <@{user}>…")
    channel, ts = str(posted["channel"]), str(posted["ts"])
    ticket.at(channel, ts)
    origin = Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=ts)
    plan = await request_restart(context.inventory, host, origin=origin, audit=context.audit)
    pending = await approvals.get(context.audit, plan.operation_id)
    approvers, required = shown_approvers(context.inventory, pending)
    text, blocks = restart_plan_message(plan, user, pending.expires_at_utc(), approvers, required)
    await edit(client, channel, ts, text, blocks)
    arm_expiry(context, client, plan.operation_id)


async def restart_in_thread(context: BotContext, client: AsyncWebClient, click: Click, plan: RestartPlan) -> None:
    user, requester, decided, channel, ts = click.user, click.requester, click.decided, click.channel, click.ts
    thread = OperationThread(client, channel, ts)
    approved = f":white_check_mark: approved by <@{user}> at {decided.decided_at}"
    thread.update(restart_status_message(plan, requester, approved + " — restarting…"))

    async def on_progress(progress: RestartProgress) -> None:
        thread.update(restart_status_message(plan, requester, approved + " — verifying…", progress))

    async def on_finding(finding: Finding) -> None:
        thread.reply(finding_message(finding), droppable=finding.status == CheckStatus.PASS)

    origin = Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=ts)
    try:
        result = await apply_restart(plan, decided, origin=origin, audit=context.audit, on_progress=on_progress,
                                     on_finding=on_finding)
    except PlanVoid as void:
        status = f":no_entry_sign: {void.message}; nothing was restarted"
        await thread.finish(restart_status_message(plan, requester, status))
        return
    except CouldNotRecord as failed:  # said in the thread for the channel (it stays there once the parent says
        # interrupted); the approver's ephemeral follows (app.py)
        said = f":warning: {failed.message}. {failed.hint}"
        thread.reply((said, as_dicts([section_block(escape(said))])))
        await thread.finish(restart_status_message(plan, requester, f"{approved} — :warning: {escape(failed.message)}"))
        raise
    final_text, final_blocks = verdict_message(result, requester, None)
    head = restart_status_message(plan, requester, approved)[1]
    await thread.finish((final_text, head + final_blocks))
    await thread.post_summary(context.audit, decided.id)


APPROVABLE = Approvable(RestartPlan, RESTART_REJECT, "nothing was restarted", restart_status_message,
                        restart_in_thread)


async def on_click(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
    await on_decision(context, APPROVABLE, ack, body, client)


COMMAND = SlackCommand("restart", on_command, approvable=APPROVABLE, more_approvables=(rollout.APPROVABLE,),
                       actions={RESTART_APPROVE: on_click, RESTART_REJECT: on_click, RESTART_NOW: on_restart_now,
                                **rollout.ACTIONS})
