"""``proofbot policy [HOST|GROUP] [--json]``: who may do what, where, as the inventory says (the same view as
Slack's `/policy`, without the user groups' members, which only Slack can tell). Reads the inventory alone."""

from __future__ import annotations

import argparse
import json

from bot.cli.command import CliCommand
from bot.cli.output import SCHEMA_VERSION
from bot.cli.session import inventory_of
from commands.inventory.policy_view import PolicyLine, PolicyView, every_policy, policies_on


def line_text(line: PolicyLine, on_target: bool) -> str:
    policy = line.policy
    head = (f"{', '.join(line.operations)}: policy {line.applied.index}" if on_target else
            f"{line.applied.index}: {', '.join(policy.targets)} · {', '.join(line.operations)}")
    implicit = " (implicit: approvals)" if line.applied.implicit else ""
    who = (f"{policy.required} of {', '.join(policy.approvers) or 'nobody'}" if line.needs_approval
           else "no approval needed")
    where = ", ".join(policy.channels) if policy.channels is not None else "any channel"
    extra = [*(["CLI: plan only"] if policy.cli else []),
             *(["the requester's own approval counts"] if line.self_approval else []),
             *([f"never satisfied: {line.never}"] if line.never else [])]
    return f"{head}{implicit} · {who} · from {where}" + "".join(f" · {e}" for e in extra)


def render(view: PolicyView) -> str:
    title = f"Who may do what, where on {view.target} ({len(view.hosts)} host(s))" if view.target else (
        "Who may do what, where: first match wins; the last is `approvals` (every host, every operation)")
    lines = [title, *(f"  {line_text(line, view.target is not None)}" for line in view.lines)]
    if view.group_note:
        lines.append(f"  ({view.group_note})")
    if view.handles:
        lines.append(f"user groups {', '.join(view.handles)}: their members need Slack (`/policy` there)")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    inventory = inventory_of(args)
    view = policies_on(inventory, args.target) if args.target else every_policy(inventory)
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, **view.to_json()}, indent=2, ensure_ascii=False))
    else:
        print(render(view))
    return 0


COMMAND = CliCommand("policy", run)
