"""``/restart GROUP`` in Slack: one plan (every host's PID, compressed within Block Kit's limits, the
whole plan attached as a file past 20 hosts), one Approve, then the rolling restart with its progress
on the parent ("2/4 restarted · restarting ct131"), one reply per host (its proof), the summary last.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.restart_text import render_rollout_plan
from bot.slack.listening import Approvable, Body, BotContext, Click
from bot.slack.plans import arm_expiry, on_decision
from bot.slack.policies import shown_approvers
from bot.slack.posting import edit, post, upload
from bot.slack.rollout_blocks import (
    ROLLOUT_APPROVE,
    ROLLOUT_FILE_OVER,
    ROLLOUT_REJECT,
    rollout_host_message,
    rollout_plan_message,
    rollout_result_message,
    rollout_status_message,
)
from bot.slack.thread import OperationThread
from commands.errors import ProofbotError, Refused
from commands.inflight import Ticket
from commands.operation import Origin
from commands.plans import PlanRequest
from commands.restart.rollout import HostOutcome, RolloutPlan, apply_rollout, request_rollout
from commands.store import approvals


async def plan_in_thread(context: BotContext, client: AsyncWebClient, command: Body, request: PlanRequest,
                         ticket: Ticket) -> None:
    """The admitted request (``admit_restart``) planned in a thread: the plan with Approve/Reject."""
    user, target, count = command["user_id"], request.subject, len(request.hosts)
    posted = await post(client, command["channel_id"],
                        f"Planning a rolling restart of {target} ({count} hosts) for <@{user}>…")
    channel, ts = str(posted["channel"]), str(posted["ts"])
    ticket.at(channel, ts)
    origin = Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=ts)
    try:
        plan = await request_rollout(context.inventory, request, origin=origin, audit=context.audit)
    except ProofbotError as exc:  # recorded by request_rollout; the placeholder says why
        await edit(client, channel, ts, f":no_entry: no rolling restart of {target}: "
                   f"{exc.message}" + (f" ({exc.hint})" if exc.hint else ""), [])
        return
    pending = await approvals.get(context.audit, plan.operation_id)
    approvers, required = shown_approvers(context.inventory, pending)
    text, blocks = rollout_plan_message(plan, user, pending.expires_at_utc(), approvers, required)
    await edit(client, channel, ts, text, blocks)
    if len(plan.hosts) > ROLLOUT_FILE_OVER:
        await upload(client, channel, ts, content=render_rollout_plan(plan),
                     filename=f"rollout-{target}-{plan.operation_id}.txt",
                     title=f"Rolling restart plan for {target}: every host")
    arm_expiry(context, client, plan.operation_id)


async def rollout_in_thread(context: BotContext, client: AsyncWebClient, click: Click, plan: RolloutPlan) -> None:
    user, requester, decided = click.user, click.requester, click.decided
    thread = OperationThread(client, click.channel, click.ts)
    approved = f":white_check_mark: approved by <@{user}> at {decided.decided_at}"
    total = len(plan.hosts)
    finished: list[HostOutcome] = []
    running: list[str] = []

    def progress() -> str:
        done = sum(1 for outcome in finished if outcome.state == "done")
        failed = len(finished) - done
        return (f"{done}/{total} restarted" + (f" · {failed} not proven" if failed else "")
                + (f" · restarting {', '.join(running)}" if running else ""))

    async def started(host: str, batch: int, batches: int) -> None:
        running.append(host)
        thread.update(rollout_status_message(plan, requester, f"{approved} — batch {batch}/{batches}", progress()))

    async def done(outcome: HostOutcome) -> None:
        running.remove(outcome.host)
        finished.append(outcome)
        thread.reply(rollout_host_message(outcome, requester))
        thread.update(rollout_status_message(plan, requester, approved, progress()))

    thread.update(rollout_status_message(plan, requester, approved + " — starting…", progress()))
    origin = Origin(actor=f"slack:{user}", via="slack", channel=click.channel, thread_ts=click.ts)
    try:
        result = await apply_rollout(plan, decided, origin=origin, audit=context.audit, fleet=context.inventory.fleet,
                                     on_host_start=started, on_host_done=done)
    except Refused as refused:
        await thread.finish(rollout_status_message(plan, requester, f":no_entry_sign: {refused.message}; "
                                                                     "nothing was restarted"))
        return
    await thread.finish(rollout_result_message(plan, requester, approved, result))


APPROVABLE = Approvable(RolloutPlan, ROLLOUT_REJECT, "nothing was restarted", rollout_status_message,
                        rollout_in_thread)


async def on_click(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
    await on_decision(context, APPROVABLE, ack, body, client)


ACTIONS = {ROLLOUT_APPROVE: on_click, ROLLOUT_REJECT: on_click}
