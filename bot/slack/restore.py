"""``/restore HOST [BACKUP]`` in Slack: a plan with Approve/Reject, then the apply as a thread.

Requests are checked before ack (a DB read, instant) so a refusal reaches the user; the
slow parts (SSH) run after it. Diffs are threaded replies, long ones attached whole.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.listening import Approvable, Body, BotContext, Click, SlackCommand
from bot.slack.plans import arm_expiry, on_decision
from bot.slack.policies import shown_approvers
from bot.slack.posting import edit, post, upload
from bot.slack.restart_blocks import restart_now_message
from bot.slack.restore_blocks import (
    RESTORE_APPROVE,
    RESTORE_APPROVE_WITH_EXTRAS,
    RESTORE_REJECT,
    diff_message,
    nothing_to_do_message,
    restore_decided_message,
    restore_plan_message,
    restore_planning_message,
)
from bot.slack.thread import OperationThread
from bot.slack.thread_blocks import finding_message, progress_message, verdict_message
from bot.words import runs_old_code
from commands.errors import PlanVoid, UsageError
from commands.findings import Finding
from commands.inflight import Ticket
from commands.inventory import Host
from commands.operation import Origin
from commands.plans import PlanRequest, admit
from commands.restore import RestorePlan, apply_restore, request_restore
from commands.store import approvals
from commands.vocabulary import CheckStatus, Operation

USAGE = "usage: /restore HOST [BACKUP]"
DIFF_INLINE_LIMIT = 2800  # longer diffs are trimmed in the message and attached whole as a file


async def on_command(context: BotContext, ack: AsyncAck, command: Body, client: AsyncWebClient) -> None:
    """HOST and BACKUP looked up in the inventory; a busy host is refused with who holds it."""
    words = command.get("text", "").split()
    if not 1 <= len(words) <= 2:
        raise UsageError(USAGE, hint="or /verify help")
    host = context.inventory.host(words[0])
    backup, _ = host.backup(words[1] if len(words) > 1 else None)
    await admit(context.audit, PlanRequest.for_host(Operation.RESTORE, host),  # the core judges; refused as the reply
                inventory=context.inventory, origin=Origin(f"slack:{command['user_id']}", "slack",
                                                           command["channel_id"]))
    with context.start(command["user_id"], Operation.RESTORE, [host.name], [backup]) as ticket:  # the planning counts
        await ack()
        await _plan_in_thread(context, client, command, host, backup, ticket)


async def _plan_in_thread(context: BotContext, client: AsyncWebClient, command: Body, host: Host, backup: str,
                          ticket: Ticket) -> None:
    user, channel = command["user_id"], command["channel_id"]
    text, blocks = restore_planning_message(host.name, f"backup {backup}", user)
    posted = await post(client, channel, text, blocks)
    channel, thread = str(posted["channel"]), str(posted["ts"])
    ticket.at(channel, thread)
    origin = Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=thread)
    plan = await request_restore(context.inventory, host, backup_name=backup, origin=origin, audit=context.audit)
    if not plan.changes or plan.unreadable:
        text, blocks = nothing_to_do_message(plan, user)
        await edit(client, channel, thread, text, blocks)
        for finding in plan.unapplied_findings():  # each file with its own read as evidence, as the CLI shows
            text, blocks = finding_message(finding)
            await post(client, channel, text, blocks, thread_ts=thread)
        return
    pending = await approvals.get(context.audit, plan.operation_id)
    approvers, required = shown_approvers(context.inventory, pending)
    text, blocks = restore_plan_message(plan, user, pending.expires_at_utc(), approvers, required)
    await edit(client, channel, thread, text, blocks)
    for change in plan.changes:
        text, blocks = diff_message(change)
        await post(client, channel, text, blocks, thread_ts=thread)
        if len(change.diff) > DIFF_INLINE_LIMIT:
            await upload(client, channel, thread, content=change.diff, filename=f"{change.name}.diff",
                         title=f"full diff of {change.name}")
    arm_expiry(context, client, plan.operation_id)


async def apply_in_thread(context: BotContext, client: AsyncWebClient, click: Click, plan: RestorePlan) -> None:
    user, requester, decided, channel, ts = click.user, click.requester, click.decided, click.channel, click.ts
    move_extras = click.action_id == RESTORE_APPROVE_WITH_EXTRAS
    approved = f":white_check_mark: approved by <@{user}> at {decided.decided_at}" + (
        " (extra files to be moved into the snapshot)" if move_extras else "")
    text, blocks = restore_decided_message(plan, requester, approved + " — applying…")
    await edit(client, channel, ts, text, blocks)
    thread = OperationThread(client, channel, ts)
    planned = ["recheck", "snapshot", "replace", *(f"file:{f.name}" for f in plan.changes)]
    seen: list[Finding] = []

    async def on_step(finding: Finding) -> None:
        seen.append(finding)
        thread.reply(finding_message(finding), droppable=finding.status == CheckStatus.PASS)

    try:
        result = await apply_restore(plan, decided, actor=f"slack:{user}", audit=context.audit,
                                     move_extras=move_extras, on_step=on_step)
    except PlanVoid as void:
        status = f":no_entry_sign: {void.message}; nothing was written"
        await thread.finish(restore_decided_message(plan, requester, status))
        return
    except BaseException:
        await thread.finish(progress_message(Operation.RESTORE, plan.host.name, requester, planned, seen))
        raise
    final_text, final_blocks = verdict_message(result, requester, plan.source.name)
    snapshot = result.extra.get("snapshot_dir") or "none"
    summary = restore_decided_message(plan, requester, f"{approved} · snapshot `{snapshot}`")[1]
    await thread.finish((final_text, summary + final_blocks))
    await thread.post_summary(context.audit, decided.id)
    if runs_old_code(result) and plan.host.service:
        text, blocks = restart_now_message(plan.host.name, decided.id)
        await post(client, channel, text, blocks, thread_ts=ts)


APPROVABLE = Approvable(RestorePlan, RESTORE_REJECT, "nothing was changed", restore_decided_message, apply_in_thread)


async def on_click(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
    await on_decision(context, APPROVABLE, ack, body, client)


COMMAND = SlackCommand(Operation.RESTORE, on_command, approvable=APPROVABLE,
                       actions={action: on_click for action in (RESTORE_APPROVE, RESTORE_APPROVE_WITH_EXTRAS,
                                                                RESTORE_REJECT)})
