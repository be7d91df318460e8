"""``policies``: who may approve what, where (first match wins), validated at its lines; today's flat
``approvals`` + ``channels`` are read as the implicit last policy, so an inventory without ``policies`` keeps
its meaning (docs/policies.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from commands.frozen import Frozen
from commands.inventory.schema import Invalid, model, rules
from commands.inventory.settings import Approvals, Strict, matching
from commands.vocabulary import Operation

if TYPE_CHECKING:  # problems imports hosts, which imports this module
    from commands.inventory.problems import KeyPath, Problems

# Slack ids: a user (U…/W…), a channel (C…/G…); a user group by its handle (`@sre-oncall`).
USER_ID = re.compile(r"[UW][A-Z0-9]{1,20}")
GROUP_HANDLE = re.compile(r"@[a-z0-9][a-z0-9._-]{0,79}")
CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,20}")
# What a policy may name; a rolling restart (``rollout``) is a restart for its policy.
POLICY_OPERATIONS = (Operation.VERIFY, Operation.RESTORE, Operation.RESTART, Operation.PING)
PLAN_ONLY = "plan-only"


@model
class Policy(Strict):
    """One rule: for these targets and operations, these approvers (ids or groups), N of them, from these
    channels; ``cli: plan-only`` makes the CLI print the plan instead of applying it."""

    targets: list[str] = field(metadata=rules(min_length=1))
    operations: list[str] = field(metadata=rules(min_length=1))
    approvers: list[str] = field(default_factory=list)
    required: int = field(default=1, metadata=rules(ge=1, le=32))
    channels: list[str] | None = None
    cli: Literal["plan-only"] | None = None

    def text(self) -> str:
        """The policy as one line (what the audit log records beside its index)."""
        shown = self.model_dump(exclude_none=True)
        return ", ".join(f"{key}: {value}" for key, value in shown.items())


def _operations(value: list[str], _: object) -> list[str]:
    for operation in value:
        if operation not in POLICY_OPERATIONS:
            raise ValueError(f"{operation!r} is not an operation a policy covers; "
                             f"one of: {', '.join(POLICY_OPERATIONS)} (a rolling restart is a restart)")
    return value


def _approvers(value: list[str], _: object) -> list[str]:
    for who in value:
        if not (USER_ID.fullmatch(who) or GROUP_HANDLE.fullmatch(who)):
            raise ValueError(f"not a Slack user id (U…) or user group handle (@name): {who!r}")
    return value


def _channels(value: list[str] | None, _: object) -> list[str] | None:
    for channel in value or []:
        matching(CHANNEL_ID, channel, "not a Slack channel id (C…)")
    return value


Policy.checks = {"operations": (_operations,), "approvers": (_approvers,), "channels": (_channels,)}


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class Applied(Frozen):
    """The policy that applies to a request: its index in ``policies`` (the implicit one is last, at
    ``len(policies)``), the rule, and whether the requester's own approval counts (only the implicit
    one, from ``approvals.allow_self_approval``)."""

    index: int
    policy: Policy
    implicit: bool
    allow_self_approval: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "text": self.policy.text(), "implicit": self.implicit}


def implicit_policy(approvals: Approvals, channels: list[str] | None) -> Policy:
    """Today's ``approvals`` and ``channels`` as the last policy: every host, every operation, one approval."""
    from commands.inventory.hosts import ALL_GROUP  # hosts imports this module (Inventory.policies)

    return Policy(targets=[ALL_GROUP], operations=list(POLICY_OPERATIONS), approvers=list(approvals.approvers),
                  required=1, channels=list(channels) if channels is not None else None)


def policy_operation(operation: str) -> str:
    return Operation.RESTART if operation == Operation.ROLLOUT else operation


def _covers(policy: Policy, host: str, groups: dict[str, tuple[str, ...]]) -> bool:
    return any(target == host or host in groups.get(target, ()) for target in policy.targets)


def policy_for(policies: Iterable[Policy], implicit: Applied, groups: dict[str, tuple[str, ...]],
               operation: str, hosts: Iterable[str]) -> Applied:
    """The policy that applies to ``operation`` on ``hosts``: for each host the first that matches, and
    over several hosts (a rolling restart) the strictest of theirs (most approvals required, then a
    channel rule, then plan-only, then the earliest)."""
    operation = policy_operation(operation)
    written = list(policies)
    chosen: list[Applied] = []
    for host in hosts:
        match = next((Applied(index, policy, False) for index, policy in enumerate(written)
                      if operation in policy.operations and _covers(policy, host, groups)), implicit)
        chosen.append(match)
    if not chosen:
        return implicit
    return max(chosen, key=lambda applied: (applied.policy.required, applied.policy.channels is not None,
                                            applied.policy.cli is not None, -applied.index))


def validate_policies(problems: Problems, written: object, names: set[str]) -> tuple[Policy, ...]:
    """``policies`` as a list of Policy; each problem at its line, a bad entry left out (and said)."""
    if written is None:
        return ()
    if not isinstance(written, list):
        problems.add(("policies",), "must be a list of policies ({targets, operations, approvers, …})")
        return ()
    kept: list[Policy] = []
    for index, entry in enumerate(written):
        where: KeyPath = ("policies", index)
        try:
            policy = Policy.model_validate(entry)
        except Invalid as exc:
            problems.add_validation(where, exc, Policy)
            continue
        unknown = [(at, target) for at, target in enumerate(policy.targets) if target not in names]
        for at, target in unknown:
            problems.add((*where, "targets", at), f"unknown host or group {target!r}",
                         key=f"policies[{index}].targets[{at}]")
        if not unknown:
            kept.append(policy)
    return tuple(kept)


def never_satisfied(policy: Policy) -> str | None:
    """Why a policy can never be satisfied from what the inventory alone says (None: it may be; a user
    group's members need Slack, ``unchecked_groups``)."""
    if set(policy.operations) <= {Operation.VERIFY, Operation.PING}:
        return None  # nothing it covers waits for an approval
    if not policy.approvers:
        return "no approvers: nothing it covers can ever be approved"
    ids = set(policy.approvers)
    if not any(GROUP_HANDLE.fullmatch(who) for who in ids) and policy.required > len(ids):
        return (f"required: {policy.required} but only {len(ids)} distinct approver(s) named: "
                "it can never be approved")
    return None


def unchecked_groups(policies: Iterable[Policy]) -> list[str]:
    """The user groups the policies name, whose members only Slack can tell (``inventory check`` says so)."""
    return sorted({who for policy in policies for who in policy.approvers if GROUP_HANDLE.fullmatch(who)})
