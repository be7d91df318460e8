"""``/policy [HOST|GROUP]`` in Slack: who may do what, where, as the inventory says, answered ephemerally in the
ack. User groups and the asker's channels are read from Slack within ``GROUP_FETCH_DEADLINE_S`` (Slack wants
the ack in 3 s): a group Slack could not tell says so, never "no members"; a channel not known to be the
asker's is counted, never named."""

from __future__ import annotations

import asyncio

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.home import Members
from bot.slack.listening import Body, BotContext, SlackCommand
from bot.slack.policies import GROUP_FETCH_DEADLINE_S, groups_seen
from bot.slack.policy_blocks import policy_message
from commands.errors import UsageError
from commands.inventory import Inventory
from commands.inventory.policy_view import PolicyView, every_policy, policies_on
from commands.redact import redact_data
from commands.vocabulary import Operation

USAGE = "usage: /policy [HOST|GROUP]"


def policy_view(inventory: Inventory, text: str) -> PolicyView:
    """Every policy, or those ruling one host or group (only ever looked up in the inventory)."""
    words = text.split()
    if len(words) > 1:
        raise UsageError(USAGE, hint="for example `/policy ct129`, or `/policy` for every policy")
    return policies_on(inventory, words[0]) if words else every_policy(inventory)


async def channels_of(client: AsyncWebClient, user: str, here: str, channels: list[str],
                      deadline_s: float) -> set[str]:
    """Which of ``channels`` ``user`` is in (``here``, where they typed, without asking); a channel Slack did
    not answer for in time, or could not read, is not theirs (fail closed: counted, not named)."""
    mine = {here} & set(channels)
    members = Members()
    try:
        async with asyncio.timeout(deadline_s):
            for channel in channels:
                if channel not in mine and user in await members.of(client, channel):
                    mine.add(channel)
    except TimeoutError:
        pass
    return mine


async def on_command(context: BotContext, ack: AsyncAck, command: Body, client: AsyncWebClient) -> None:
    view = policy_view(context.inventory, command.get("text", ""))
    # Both reads share the deadline, side by side: the answer is the ack's own ephemeral reply.
    seen, visible = await asyncio.gather(
        groups_seen(context, client, view.handles),
        channels_of(client, str(command["user_id"]), str(command["channel_id"]), view.channels,
                    GROUP_FETCH_DEADLINE_S))
    text, blocks = redact_data(policy_message(view, seen, visible))  # the ack bypasses the redacting client
    await ack(text=text, blocks=blocks, response_type="ephemeral")


COMMAND = SlackCommand(Operation.POLICY, on_command, empty_text_is_help=False)
