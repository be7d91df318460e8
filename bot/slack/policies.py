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

from bot.slack.blocks import context_block, escape, section_block
from commands.approvers import GroupMembers, Rule, resolve
from commands.errors import CouldNotCheck
from commands.inventory import Inventory
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


POLICY_BLOCKS_MAX = 12  # the App Home's policy section: header, one block per policy, a note past it


async def policy_blocks(context: Any, client: AsyncWebClient,
                        can_see: Callable[[str], Awaitable[bool]]) -> list[dict[str, Any]]:
    """Who may do what, where, as the inventory says (first match wins), each user group with its members as
    Slack says now (an empty group is a policy that can never be satisfied; one that cannot be read, said).
    A channel the viewer is not in is counted, never named (as the rest of the Home)."""
    inventory: Inventory = context.inventory
    implicit = inventory.policy(Operation.RESTORE, [])  # the flat approvals, read as the last policy
    rules = [*inventory.policies, implicit.policy]
    fetch = group_members(client)
    members: dict[str, str] = {}
    for handle in sorted({who for rule in rules for who in rule.approvers if who.startswith("@")}):
        try:
            count = len(await context.groups.members(handle.removeprefix("@"), fetch))
            members[handle] = f"{count} members" if count else "no members: never satisfied"
        except CouldNotCheck as exc:
            members[handle] = f"not checked: {exc.message}"
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "Who may do what, where"}},
              context_block("from the inventory's `policies`, first match wins; the last is `approvals` "
                            "(every host, every operation)").to_dict()]
    for index, rule in enumerate(rules[:POLICY_BLOCKS_MAX - 3]):
        seen = [channel for channel in rule.channels or [] if await can_see(channel)]
        unseen = len(rule.channels or []) - len(seen)
        who = ", ".join(f"<@{w}>" if not w.startswith("@") else f"`{escape(w)}` ({escape(members[w])})"
                        for w in rule.approvers) or "nobody"
        where = ", ".join([*(f"<#{c}>" for c in seen), *([f"{unseen} channel(s) you are not in"] if unseen else [])]
                          ) if rule.channels is not None else "any channel"
        blocks.append(section_block(
            f"*{index}*{' (implicit)' if index == len(inventory.policies) else ''} · "
            f"{escape(', '.join(rule.targets))} · {escape(', '.join(rule.operations))} · "
            f"{rule.required} of {who} · from {where}"
            + (" · CLI: plan only" if rule.cli else "")).to_dict())
    if len(rules) > POLICY_BLOCKS_MAX - 3:
        blocks.append(context_block(f"… {len(rules) - POLICY_BLOCKS_MAX + 3} more: `proofbot inventory show`"
                                    ).to_dict())
    return blocks


def shown_approvers(inventory: Inventory, pending: PendingPlan) -> tuple[list[str], int]:
    """Who may approve this plan and how many are required, as its policy says (for the plan's message)."""
    policy = inventory.policy(pending.operation, plan_hosts(inventory, pending)).policy
    return list(policy.approvers), policy.required
