"""``/verify HOST [BACKUP]`` in Slack, and the "Verify now" button: the checks as a thread.

The parent shows progress (at most every 2 s) and then the verdict; each check's
evidence is a threaded reply; the thread ends with the summary read back from the log.
A group or several hosts (``/verify gpu-west``, ``/verify ct129 ct130 pre-ddtree``) is a fleet
verify (``bot.slack.fleet``); its "Re-verify the N that failed" button is answered here too.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.fleet import verify_fleet_in_thread
from bot.slack.listening import Body, BotContext, SlackCommand
from bot.slack.posting import post
from bot.slack.restart_blocks import restart_now_message
from bot.slack.thread import OperationThread
from bot.slack.thread_blocks import FLEET_REVERIFY, VERIFY_NOW, finding_message, progress_message, verdict_message
from bot.words import runs_old_code
from commands.errors import UnknownHost, UsageError
from commands.findings import Finding
from commands.inflight import Ticket
from commands.inventory import Inventory
from commands.operation import Origin
from commands.plans import refuse_outside
from commands.verify import VerifyPlan, verify
from commands.verify.fleet import FleetRequest
from commands.verify.plan import plan_fleet
from commands.verify.reverify import reverify_request
from commands.vocabulary import CheckStatus, Operation

USAGE = "usage: /verify HOST [BACKUP], or /verify GROUP|HOST... [BACKUP]"


def verify_plan(inventory: Inventory, command: Body) -> VerifyPlan:
    """HOST [BACKUP] looked up in the inventory, or refused."""
    words = command.get("text", "").split()
    if not 1 <= len(words) <= 2:
        raise UsageError(USAGE, hint="or /verify help")
    # alone: a host with nothing to check is refused as the CLI refuses it, saying what to add
    return VerifyPlan.for_host(inventory.host(words[0]), words[1] if len(words) > 1 else None, alone=True)


def verify_request(inventory: Inventory, command: Body) -> VerifyPlan | FleetRequest:
    """One host (``HOST [BACKUP]``, as ever), or a fleet: every word a host or a group, but a last word
    that is neither, which is the backup each host that has it compares."""
    words = command.get("text", "").split()
    if not words:
        raise UsageError(USAGE, hint="or /verify help")
    known = inventory.hosts.keys() | inventory.groups.keys()
    targets, backup = (words[:-1], words[-1]) if len(words) > 1 and words[-1] not in known else (words, None)
    if len(targets) == 1 and targets[0] in inventory.hosts:
        return VerifyPlan.for_host(inventory.hosts[targets[0]], backup, alone=True)
    try:
        hosts = inventory.targets(targets)
    except UnknownHost as unknown:  # a typo, or one word too many: say both the names and the usage
        raise UnknownHost(unknown.message, hint=f"{USAGE}\n{unknown.hint}") from None
    return FleetRequest(" ".join(targets), plan_fleet(hosts, backup))


def verify_work(context: BotContext, user: str, request: VerifyPlan | FleetRequest, channel: str = "") -> Ticket:
    """The request's slot among the operations in flight (a fleet is one), or AlreadyRunning / OverLimit; refused
    first when the verify policy of its hosts does not take it in ``channel`` (docs/policies.md)."""
    hosts = [p.host.name for p in request.plan.plans] if isinstance(request, FleetRequest) else [request.host.name]
    target = request.target if isinstance(request, FleetRequest) else request.host.name
    if channel:
        refuse_outside(context.inventory, Operation.VERIFY, target, hosts, channel)
    if isinstance(request, FleetRequest):
        plans = request.plan.plans
        return context.start(user, Operation.VERIFY, [p.host.name for p in plans], [p.backup_name for p in plans],
                             request.target)
    return context.start(user, Operation.VERIFY, [request.host.name], [request.backup_name])


async def on_command(context: BotContext, ack: AsyncAck, command: Body, client: AsyncWebClient) -> None:
    request = verify_request(context.inventory, command)
    with verify_work(context, command["user_id"], request, command["channel_id"]) as ticket:
        await ack()
        if isinstance(request, FleetRequest):
            await verify_fleet_in_thread(context, client, command, request, ticket)
        else:
            await verify_in_thread(context, client, command, request, ticket)


async def on_reverify(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
    """Re-verify the hosts that did not pass, read from the audit log by the fleet operation id the
    button carries; a new fleet operation with its own parent message."""
    context.check_channel(body["channel"]["id"])
    request = await reverify_request(context.inventory, context.audit, str(body["actions"][0]["value"]))
    command = {"user_id": body["user"]["id"], "channel_id": body["channel"]["id"]}
    with verify_work(context, command["user_id"], request, command["channel_id"]) as ticket:
        await ack()
        await verify_fleet_in_thread(context, client, command, request, ticket)


async def on_verify_now(context: BotContext, ack: AsyncAck, body: Body, client: AsyncWebClient) -> None:
    command = await context.command_for_click(body)
    context.check_channel(command["channel_id"])
    plan = verify_plan(context.inventory, command)
    with verify_work(context, command["user_id"], plan, command["channel_id"]) as ticket:
        await ack()
        await verify_in_thread(context, client, command, plan, ticket)


async def verify_in_thread(context: BotContext, client: AsyncWebClient, command: Body, plan: VerifyPlan,
                           ticket: Ticket) -> None:
    user = command["user_id"]
    planned = plan.check_names()
    thread = await OperationThread.open(client, command["channel_id"],
                                        progress_message(Operation.VERIFY, plan.host.name, user, planned, []))
    ticket.at(thread.channel, thread.ts)
    seen: list[Finding] = []

    async def on_finding(finding: Finding) -> None:
        seen.append(finding)
        thread.reply(finding_message(finding), droppable=finding.status == CheckStatus.PASS)
        thread.update(progress_message(Operation.VERIFY, plan.host.name, user, planned, seen))

    origin = Origin(actor=f"slack:{user}", via="slack", channel=thread.channel, thread_ts=thread.ts)
    try:
        result = await verify(plan, origin=origin, audit=context.audit, on_finding=on_finding)
    except BaseException:
        await thread.abandon()
        raise
    await thread.finish(verdict_message(result, user, plan.backup_name))
    await thread.post_summary(context.audit, result.operation_id)
    if runs_old_code(result) and plan.host.service:
        text, blocks = restart_now_message(plan.host.name, result.operation_id)
        await post(client, thread.channel, text, blocks, thread_ts=thread.ts)


COMMAND = SlackCommand(Operation.VERIFY, on_command, actions={VERIFY_NOW: on_verify_now, FLEET_REVERIFY: on_reverify})
