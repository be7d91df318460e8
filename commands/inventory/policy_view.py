"""What `/policy` and `proofbot policy` show, as data: every policy in order (the implicit one last), or for one
host or group which policy rules each operation on it; each with why it can never be satisfied, when it cannot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commands.inventory.hosts import Inventory
from commands.inventory.policies import GROUP_HANDLE, POLICY_OPERATIONS, Applied, Policy, never_satisfied
from commands.vocabulary import Operation


@dataclass(frozen=True)
class PolicyLine:
    """One policy as shown: ``operations`` are the ones this line answers for (all of the policy's in the full
    list; on a target, those it rules there)."""

    applied: Applied
    operations: tuple[str, ...]

    @property
    def policy(self) -> Policy:
        return self.applied.policy

    @property
    def never(self) -> str | None:
        """Why nothing this line covers can ever be approved, from what the inventory alone says."""
        return never_satisfied(self.policy.model_copy(update={"operations": list(self.operations)}))

    @property
    def needs_approval(self) -> bool:
        """False when nothing this line answers for waits for an approval (verify, ping)."""
        return not set(self.operations) <= {Operation.VERIFY, Operation.PING}

    @property
    def self_approval(self) -> bool:
        return self.applied.implicit and self.applied.allow_self_approval

    def to_json(self) -> dict[str, Any]:
        policy = self.policy
        return {"index": self.applied.index, "implicit": self.applied.implicit, "operations": list(self.operations),
                "targets": policy.targets, "approvers": policy.approvers, "required": policy.required,
                "channels": policy.channels, "cli": policy.cli, "requester_counts": self.self_approval,
                "never_satisfied": self.never, "text": policy.text()}


@dataclass(frozen=True)
class PolicyView:
    """The answer: ``target`` None for every policy; else its hosts and, for a group, the note on restore."""

    target: str | None
    hosts: tuple[str, ...]
    lines: tuple[PolicyLine, ...]

    @property
    def handles(self) -> list[str]:
        """The user groups named, each once, in the order shown (their members only Slack can tell)."""
        seen: dict[str, None] = {}
        for line in self.lines:
            seen.update((who, None) for who in line.policy.approvers if GROUP_HANDLE.fullmatch(who))
        return list(seen)

    @property
    def channels(self) -> list[str]:
        seen: dict[str, None] = {}
        for line in self.lines:
            seen.update((channel, None) for channel in line.policy.channels or [])
        return list(seen)

    @property
    def group_note(self) -> str | None:
        """A group has no one restore policy: a restore takes one host (each host's own rule applies)."""
        if self.target is None or self.hosts == (self.target,):
            return None
        return (f"over the {len(self.hosts)} hosts of {self.target}, each operation takes the strictest host's "
                "policy (as a rolling restart does); a restore takes one host: ask for that host")

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "hosts": list(self.hosts), "policies": [line.to_json() for line in self.lines]}


def every_policy(inventory: Inventory) -> PolicyView:
    """The written policies in order, first match wins, then the flat ``approvals`` as the implicit last one."""
    implicit = inventory.policy(Operation.RESTORE, [])  # no host: nothing written matches, the implicit one
    applied = [*(Applied(index, policy, False) for index, policy in enumerate(inventory.policies)), implicit]
    return PolicyView(None, (), tuple(PolicyLine(a, tuple(a.policy.operations)) for a in applied))


def policies_on(inventory: Inventory, target: str) -> PolicyView:
    """For a host or group (only ever looked up in the inventory): each operation with the policy that rules
    it there, operations ruled by the same policy on one line, in the order of the first."""
    hosts = tuple(host.name for host in inventory.targets([target]))
    group = inventory.is_group(target)
    ruled: dict[int, tuple[Applied, list[str]]] = {}
    for operation in POLICY_OPERATIONS:
        if group and operation == Operation.RESTORE:
            continue
        applied = inventory.policy(operation, hosts)
        ruled.setdefault(applied.index, (applied, []))[1].append(operation)
    lines = tuple(PolicyLine(applied, tuple(operations)) for applied, operations in ruled.values())
    return PolicyView(target, hosts, lines)
