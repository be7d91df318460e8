"""Policies in Slack: a plan's rule with its user groups resolved through ``usergroups.list`` (handle to id)
and ``usergroups.users.list`` (members), cached (commands/approvers.py); any Slack error refuses the click.
And the words: "1 of 2 approvals: <@U…>" on the plan's message."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.policy_blocks import GroupSeen, home_policy_blocks
from commands.approvers import GroupMembers, Rule, resolve
from commands.errors import CouldNotCheck
from commands.inventory import Inventory
from commands.inventory.policy_view import every_policy
from commands.store.approvals import PendingPlan
from commands.vocabulary import Operation

# A click is judged before its ack (the refusal is the answer), and Slack wants the ack within 3 s: the two
# calls that resolve a group share this deadline, and a Slack that does not answer in time refuses the click.
GROUP_FETCH_DEADLINE_S = 2.0
COUNT_BLOCK = "proofbot_approvals"  # the block_id of the count on a plan's message (replaced, never added twice)


def group_members(client: AsyncWebClient, deadline_s: float = GROUP_FETCH_DEADLINE_S) -> GroupMembers:
    """A group's members by its handle, asked of Slack within ``deadline_s``; a Slack error, an unknown handle,
    no answer in time or no connection: CouldNotCheck (never an empty group)."""
    async def fetch(handle: str) -> frozenset[str]:
        try:
            async with asyncio.timeout(deadline_s):
                listed = await client.usergroups_list()
                group = next((g for g in listed.get("usergroups") or [] if g.get("handle") == handle), None)
                if group is None:
                    raise CouldNotCheck(f"Slack has no enabled user group @{handle}")
                users = await client.usergroups_users_list(usergroup=str(group["id"]))
        except SlackApiError as exc:
            raise CouldNotCheck(f"Slack answered {exc.response.get('error')!r}") from None
        except TimeoutError:
            raise CouldNotCheck(f"Slack did not answer within {deadline_s:g} s") from None
        except (ClientError, OSError) as exc:
            raise CouldNotCheck(f"Slack could not be reached ({type(exc).__name__})") from None
        return frozenset(str(user) for user in users.get("users") or [])
    return fetch


def plan_hosts(inventory: Inventory, pending: PendingPlan) -> list[str]:
    """The hosts a plan covers: its host, or a rolling restart's group's hosts."""
    if pending.operation == Operation.ROLLOUT and inventory.is_group(pending.host):
        return list(inventory.groups[pending.host])
    return [pending.host]


async def rule_for(context: Any, client: AsyncWebClient, pending: PendingPlan) -> Rule:
    """The rule that applies to ``pending`` now, under today's inventory, its groups resolved (or Refused)."""
    applied = context.inventory.policy(pending.operation, plan_hosts(context.inventory, pending))
    return await resolve(applied, context.groups, group_members(client))


def count_text(counted: tuple[str, ...], required: int) -> str:
    who = ", ".join(f"<@{user}>" for user in counted)
    return f"{len(counted)} of {required} approvals" + (f": {who}" if who else "")


def with_count(blocks: list[dict[str, Any]], counted: tuple[str, ...], required: int) -> list[dict[str, Any]]:
    """The plan message's blocks with the approvals counted so far just above its buttons."""
    kept = [block for block in blocks if block.get("block_id") != COUNT_BLOCK]
    count = ContextBlock(block_id=COUNT_BLOCK, elements=[MarkdownTextObject(
        text=f":ballot_box_with_check: {count_text(counted, required)}")]).to_dict()
    at = next((i for i, block in enumerate(kept) if block.get("type") == "actions"), len(kept))
    return [*kept[:at], count, *kept[at:]]


GROUPS_READ_MAX = 16  # user groups asked of Slack for one view; any past it is said "not checked"


async def groups_seen(context: Any, client: AsyncWebClient, handles: list[str],
                      deadline_s: float = GROUP_FETCH_DEADLINE_S) -> dict[str, GroupSeen]:
    """Each user group's members as Slack says now (through the bot's cache), all of them within one
    ``deadline_s``: a group not read in time, or that Slack could not tell, says why, never "no members"."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    seen: dict[str, GroupSeen] = {}
    for handle in handles:
        left = end - loop.time()
        if len(seen) >= GROUPS_READ_MAX or left <= 0:
            why = (f"Slack did not answer within {deadline_s:g} s" if left <= 0
                   else f"more than {GROUPS_READ_MAX} user groups in one view")
            seen[handle] = GroupSeen(None, why)
            continue
        try:
            async with asyncio.timeout(left):  # the cache's lock may wait on another fetch: bounded too
                members = await context.groups.members(handle.removeprefix("@"), group_members(client, deadline_s))
            seen[handle] = GroupSeen(members)
        except CouldNotCheck as exc:
            seen[handle] = GroupSeen(None, exc.message)
        except TimeoutError:
            seen[handle] = GroupSeen(None, f"Slack did not answer within {deadline_s:g} s")
    return seen


async def policy_blocks(context: Any, client: AsyncWebClient,
                        can_see: Callable[[str], Awaitable[bool]]) -> list[dict[str, Any]]:
    """The App Home's *Who may do what, where*: every policy (first match wins), each user group with its
    member count as Slack says now. A channel the viewer is not in is counted, never named (as the rest of
    the Home)."""
    view = every_policy(context.inventory)
    seen = await groups_seen(context, client, view.handles)
    visible = {channel for channel in view.channels if await can_see(channel)}
    return home_policy_blocks(view, seen, visible)


def shown_approvers(inventory: Inventory, pending: PendingPlan) -> tuple[list[str], int]:
    """Who may approve this plan and how many are required, as its policy says (for the plan's message)."""
    policy = inventory.policy(pending.operation, plan_hosts(inventory, pending)).policy
    return list(policy.approvers), policy.required
