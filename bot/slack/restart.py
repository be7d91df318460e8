"""``/restart HOST`` in Slack: a plan with Approve/Reject, then the restart with live progress.

The parent shows the plan, then each signal's state while the restart is verified
(updated at most every 2 s), then the verdict; each signal's evidence is a reply.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import finding_message, restart_plan_message, restart_status_message, verdict_message
from bot.slack.plans import arm_expiry
from bot.slack.thread import OperationThread
from commands.errors import UsageError
from commands.findings import Finding
from commands.inventory import Host, Inventory
from commands.operation import Origin
from commands.restart.plan import RestartPlan, RestartPlanVoid, plan_restart
from commands.restart.run import restart
from commands.restart.verdict import check_names
from commands.restart.watch import RestartProgress
from commands.store import approvals, locks
from commands.store.events import AuditStore

USAGE = "usage: /restart HOST"


async def restart_request(inventory: Inventory, audit: AuditStore, command: dict[str, Any]) -> Host:
    """HOST looked up in the inventory, with a service; a busy host is refused with who holds it."""
    words = command.get("text", "").split()
    if len(words) != 1:
        raise UsageError(USAGE, hint="or /verify help")
    host = inventory.host(words[0])
    if host.service is None:
        raise UsageError(f"{host.name} has no service in the inventory: nothing to restart")
    await locks.refuse_if_busy(audit, host.name)
    return host


async def plan_restart_in_thread(inventory: Inventory, audit: AuditStore, client: AsyncWebClient, user: str,
                                 channel: str, host: Host, timers: set[asyncio.Task[None]]) -> None:
    text = f"Planning a restart of {host.name} for <@{user}>…"
    posted = await client.chat_postMessage(channel=channel, text=text)
    origin = Origin(actor=f"slack:{user}", via="slack", channel=str(posted["channel"]), thread_ts=str(posted["ts"]))
    plan = await plan_restart(host)
    lock = await locks.acquire(audit, host.name, plan.operation_id, "restart", origin.actor, origin.channel,
                               origin.thread_ts)
    try:
        await audit.append("requested", operation_id=plan.operation_id, operation="restart", host=host.name,
                           actor=origin.actor, details={"plan_hash": plan.plan_hash, "checks": check_names(plan),
                                                        "origin": origin.to_json()})
        await audit.append("plan-shown", operation_id=plan.operation_id, operation="restart", host=host.name,
                           actor=origin.actor, details=plan.to_json())
        pending = await approvals.create(audit, plan_id=plan.operation_id, operation="restart", host=host.name,
                                         requested_by=origin.actor, plan_hash=plan.plan_hash,
                                         details=plan.to_json(), approvals=inventory.approvals,
                                         channel=origin.channel, message_ts=origin.thread_ts)
    except BaseException:
        await locks.release(audit, lock)
        raise
    text, blocks = restart_plan_message(plan, user, pending.expires_at_utc(), inventory.approvals.approvers)
    await client.chat_update(channel=origin.channel or channel, ts=origin.thread_ts or "", text=text, blocks=blocks)
    arm_expiry(audit, client, inventory, plan.operation_id, timers)


async def restart_in_thread(inventory: Inventory, audit: AuditStore, client: AsyncWebClient, body: dict[str, Any],
                            pending: approvals.PendingPlan) -> None:
    user = body["user"]["id"]
    requester = pending.requested_by.removeprefix("slack:")
    channel, ts = pending.channel or body["channel"]["id"], pending.message_ts or body["message"]["ts"]
    host = inventory.host(pending.host)
    if pending.state == "rejected":
        await approvals.close_unapplied(audit, pending.id, f"slack:{user}", "rejected", "rejected in Slack")
        text, blocks = restart_status_message(RestartPlan.from_json(pending.details, host), requester,
                                              f":no_entry_sign: rejected by <@{user}> at {pending.decided_at}; "
                                              "nothing was restarted")
        await client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
        return
    thread = OperationThread(client, channel, ts)
    approved = f":white_check_mark: approved by <@{user}> at {pending.decided_at}"
    try:
        plan = RestartPlan.from_json(pending.details, host)
    except RestartPlanVoid as void:
        await approvals.close_unapplied(audit, pending.id, "proofbot", "void", void.message)
        await thread.finish((f"restart plan void: {void.message}", []))
        raise
    thread.update(restart_status_message(plan, requester, approved + " — restarting…"))

    async def on_progress(progress: RestartProgress) -> None:
        thread.update(restart_status_message(plan, requester, approved + " — verifying…", progress))

    async def on_finding(finding: Finding) -> None:
        thread.reply(finding_message(finding))

    origin = Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=ts)
    try:
        result = await restart(plan, origin=origin, audit=audit, on_progress=on_progress, on_finding=on_finding,
                               request_recorded=True)
    except RestartPlanVoid as void:
        await approvals.close(audit, pending.id, "void")
        await thread.finish(restart_status_message(plan, requester, f":no_entry_sign: {void.message}; "
                                                   "nothing was restarted"))
        return
    await approvals.close(audit, pending.id, "applied")
    final_text, final_blocks = verdict_message(result, requester, None)
    head = restart_status_message(plan, requester, approved)[1]
    await thread.finish((final_text, head + final_blocks))
    await thread.post_summary(audit, pending.id)
