"""The approvers of a plan's policy as Slack user ids: ids as written, user groups (``@sre-oncall``) resolved
through a front-end's ``GroupMembers`` and cached ``approvals.group_ttl_s`` (default ``GROUP_TTL_S``). A group
that cannot be resolved refuses the click (never falls open); the judgement is commands/store/approvals.decide."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from commands.errors import CouldNotCheck, Refused
from commands.inventory.policies import GROUP_HANDLE, Applied
from commands.inventory.settings import GROUP_TTL_S, Approvals

GroupMembers = Callable[[str], Awaitable[frozenset[str]]]  # a handle without '@' -> user ids; CouldNotCheck


@dataclass(frozen=True)
class Rule:
    """The policy that applies to a plan, with its approvers resolved to user ids (``via``: how each one is
    named in the policy, an id and/or groups)."""

    applied: Applied
    via: Mapping[str, tuple[str, ...]]

    @property
    def approvers(self) -> frozenset[str]:
        return frozenset(self.via)

    @property
    def required(self) -> int:
        return self.applied.policy.required

    @classmethod
    def of_approvals(cls, approvals: Approvals) -> Rule:
        """Today's flat ``approvals`` alone (no ``policies``, no groups): the implicit policy."""
        from commands.inventory.policies import implicit_policy

        applied = Applied(0, implicit_policy(approvals, None), True, approvals.allow_self_approval)
        return cls(applied, {who: (who,) for who in approvals.approvers})


@dataclass
class GroupCache:
    """Members of each user group, asked (through the front-end's ``fetch``) at most once per ``ttl_s`` per
    group; an error is never cached (the next click asks again) and never read as "no members"."""

    ttl_s: float = GROUP_TTL_S
    clock: Callable[[], float] = time.monotonic
    _known: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def members(self, handle: str, fetch: GroupMembers) -> frozenset[str]:
        async with self._lock:  # one fetch per group per refresh, however many clicks arrive at once
            known = self._known.get(handle)
            if known is not None and self.clock() - known[0] < self.ttl_s:
                return known[1]
            users = await fetch(handle)
            self._known[handle] = (self.clock(), users)
            return users


async def resolve(applied: Applied, groups: GroupCache | None, fetch: GroupMembers | None = None) -> Rule:
    """The rule with every approver as a user id; a group that cannot be resolved raises Refused."""
    via: dict[str, tuple[str, ...]] = {}
    for who in applied.policy.approvers:
        if not GROUP_HANDLE.fullmatch(who):
            via[who] = (*via.get(who, ()), who)
            continue
        if groups is None or fetch is None:
            raise Refused(f"the approvers of this plan include the Slack user group {who}, which only the "
                          "Slack bot can resolve", hint="approve it in Slack")
        try:
            members = await groups.members(who.removeprefix("@"), fetch)
        except CouldNotCheck as exc:
            raise Refused(f"could not resolve the approver group {who} ({exc.message}); the approval is not "
                          "counted", hint="try again in a minute; proofbot never counts an approval it cannot check"
                          ) from None
        for user in sorted(members):
            via[user] = (*via.get(user, ()), who)
    return Rule(applied, via)

