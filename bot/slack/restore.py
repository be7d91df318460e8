"""``/restore HOST [BACKUP]`` in Slack: a plan with Approve/Reject, then the apply as a thread.

Requests and clicks are checked before ack (a DB read, instant) so a refusal reaches the
user; the slow parts (SSH) run after it. Expiry is a timer per plan that removes the
buttons and releases the host.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import (
    RESTORE_APPROVE_WITH_EXTRAS,
    decided_message,
    diff_message,
    finding_message,
    nothing_to_do_message,
    plan_message,
    planning_message,
    progress_message,
    restart_now_message,
    verdict_message,
)
from bot.slack.plans import arm_expiry
from bot.slack.thread import OperationThread
from commands.errors import UsageError
from commands.findings import Finding
from commands.inventory import Host, Inventory
from commands.operation import Origin
from commands.restore.apply import PlanVoid
from commands.restore.plan import plan_from_json
from commands.restore.run import apply_restore, request_restore
from commands.store import approvals, locks
from commands.store.events import AuditStore

USAGE = "usage: /restore HOST [BACKUP]"
DIFF_INLINE_LIMIT = 2800  # longer diffs are trimmed in the message and attached whole as a file


@dataclass(frozen=True)
class RestoreRequest:
    host: Host
    backup: str


async def restore_request(inventory: Inventory, audit: AuditStore, command: dict[str, Any]) -> RestoreRequest:
    """HOST and BACKUP looked up in the inventory; a busy host is refused with who holds it."""
    words = command.get("text", "").split()
    if not 1 <= len(words) <= 2:
        raise UsageError(USAGE, hint="or /verify help")
    host = inventory.host(words[0])
    backup_name, _ = host.backup(words[1] if len(words) > 1 else None)
    await locks.refuse_if_busy(audit, host.name)
    return RestoreRequest(host, backup_name)


async def plan_in_thread(inventory: Inventory, audit: AuditStore, client: AsyncWebClient, command: dict[str, Any],
                         request: RestoreRequest, timers: set[asyncio.Task[None]]) -> None:
    user, channel = command["user_id"], command["channel_id"]
    text, blocks = planning_message(request.host.name, f"backup {request.backup}", user)
    posted = await client.chat_postMessage(channel=channel, text=text, blocks=blocks)
    thread = str(posted["ts"])
    origin = Origin(actor=f"slack:{user}", via="slack", channel=str(posted["channel"]), thread_ts=thread)
    plan = await request_restore(inventory, request.host, backup_name=request.backup, origin=origin, audit=audit)
    if not plan.changes or plan.unreadable:
        text, blocks = nothing_to_do_message(plan, user)
        await client.chat_update(channel=origin.channel or channel, ts=thread, text=text, blocks=blocks)
        return
    pending = await approvals.get(audit, plan.operation_id)
    text, blocks = plan_message(plan, user, pending.expires_at_utc(), inventory.approvals.approvers)
    await client.chat_update(channel=origin.channel or channel, ts=thread, text=text, blocks=blocks)
    for change in plan.changes:
        text, blocks = diff_message(change)
        await client.chat_postMessage(channel=origin.channel or channel, thread_ts=thread, text=text, blocks=blocks)
        if len(change.diff) > DIFF_INLINE_LIMIT:
            await client.files_upload_v2(channel=origin.channel or channel, thread_ts=thread, content=change.diff,
                                         filename=f"{change.name}.diff", title=f"full diff of {change.name}")
    arm_expiry(audit, client, inventory, plan.operation_id, timers)


async def apply_in_thread(inventory: Inventory, audit: AuditStore, client: AsyncWebClient, body: dict[str, Any],
                          pending: approvals.PendingPlan) -> None:
    user = body["user"]["id"]
    requester = pending.requested_by.removeprefix("slack:")
    plan = plan_from_json(inventory.host(pending.host), pending.details)
    channel, ts = pending.channel or body["channel"]["id"], pending.message_ts or body["message"]["ts"]
    if pending.state == "rejected":
        await approvals.close_unapplied(audit, pending.id, f"slack:{user}", "rejected", "rejected in Slack")
        text, blocks = decided_message(plan, requester, f":no_entry_sign: rejected by <@{user}> at "
                                       f"{pending.decided_at}; nothing was changed")
        await client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
        return
    move_extras = body["actions"][0]["action_id"] == RESTORE_APPROVE_WITH_EXTRAS
    approved = f":white_check_mark: approved by <@{user}> at {pending.decided_at}" + (
        " (extra files to be moved into the snapshot)" if move_extras else "")
    text, blocks = decided_message(plan, requester, approved + " — applying…")
    await client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
    thread = OperationThread(client, channel, ts)
    planned = ["recheck", "snapshot", "replace", *(f"file:{f.name}" for f in plan.changes)]
    seen: list[Finding] = []

    async def on_step(finding: Finding) -> None:
        seen.append(finding)
        thread.reply(finding_message(finding))

    try:
        result = await apply_restore(inventory, pending.id, actor=f"slack:{user}", audit=audit,
                                     move_extras=move_extras, on_step=on_step)
    except PlanVoid as void:
        await thread.finish(decided_message(plan, requester, f":no_entry_sign: {void.message}; nothing was written"))
        return
    except BaseException:
        await thread.finish(progress_message("restore", plan.host.name, requester, planned, seen))
        raise
    final_text, final_blocks = verdict_message(result, requester, plan.source.name)
    snapshot = result.extra.get("snapshot_dir") or "none"
    summary = decided_message(plan, requester, f"{approved} · snapshot `{snapshot}`")[1]
    await thread.finish((final_text, summary + final_blocks))
    await thread.post_summary(audit, pending.id)
    if any(f.name == "stale-process" and f.status == "warn" for f in result.checks) and plan.host.service:
        text, blocks = restart_now_message(plan.host.name, pending.id)
        await client.chat_postMessage(channel=channel, thread_ts=ts, text=text, blocks=blocks)
