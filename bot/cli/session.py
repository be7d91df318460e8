"""A CLI command's session: the inventory and audit DB from its flags, the local user as origin, and asking
the person at the terminal (a refusal is audited; an approval is a "y" at the prompt or ``--yes``)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.cli import started
from commands.errors import ProofbotError, Refused
from commands.frozen import Frozen
from commands.inventory import Inventory, inventory_path, load_inventory

if TYPE_CHECKING:
    from commands.operation import Origin
    from commands.plans import Decidable
    from commands.store.approvals import PendingPlan
    from commands.store.db import AuditStore



def inventory_of(args: argparse.Namespace) -> Inventory:
    return load_inventory(inventory_path(getattr(args, "inventory", None)))


@dataclass(frozen=True, eq=False, repr=False)
class Session(Frozen):
    """One CLI command's inventory, audit store and origin (the local user)."""

    inventory: Inventory
    audit: AuditStore
    origin: Origin

    async def refused(self, operation: str, host: str, exc: ProofbotError) -> None:
        """A request refused before it became an operation (unknown host, bad backup…) is still audited."""
        from commands.store.kinds import Refusal
        from commands.store.log import audit_log

        await audit_log(self.audit, operation, actor=self.origin.actor).refused(
            Refusal(str(exc), requested_host=host, origin=self.origin.to_json()))


@asynccontextmanager
async def session(args: argparse.Namespace, inventory: Inventory | None = None) -> AsyncIterator[Session]:
    """The command's inventory (loaded now unless given) and audit log. The log opens in a worker
    thread: a handshake started ahead (``commands.ssh.connect_ahead``) goes on meanwhile."""
    inventory = inventory if inventory is not None else inventory_of(args)
    from commands.operation import Origin
    from commands.store.db import AuditStore, db_target

    audit = await asyncio.to_thread(AuditStore.open, db_target(getattr(args, "db", None)))
    started()  # the command's modules, inventory and audit log are loaded: the cyclic GC runs from here
    try:
        yield Session(inventory, audit, Origin.local_user())
    finally:
        audit.close()


async def load_meanwhile(*modules: str) -> None:
    """Import modules in a worker thread: the event loop goes on with what is in flight (an SSH
    handshake started ahead) instead of stopping for the imports."""
    missing = [name for name in modules if name not in sys.modules]
    if missing:
        await asyncio.to_thread(lambda: [importlib.import_module(name) for name in missing])


async def confirm(question: str) -> str:
    """'' when the person at the terminal said yes, else why not (no terminal, or not yes)."""
    if not sys.stdin.isatty():
        return "no terminal to ask for confirmation on"
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = await asyncio.to_thread(sys.stdin.readline)
    except (EOFError, KeyboardInterrupt):
        answer = ""
    return "" if answer.strip().lower() in ("y", "yes") else "not confirmed at the prompt"


def _plan_only(cli: Session, plan: Decidable) -> str:
    """Why the CLI may only show this plan (a ``cli: plan-only`` policy covers its hosts), or ''."""
    applied = cli.inventory.policy(plan.operation, plan.apply_hosts)
    if applied.policy.cli != "plan-only":
        return ""
    return f"policy {applied.index} of the inventory is plan-only for the CLI ({applied.policy.text()})"


def _slack_command(plan: Decidable) -> str:
    """The Slack command that requests the same plan (a rolling restart is /restart GROUP)."""
    from commands.inventory.policies import policy_operation

    target = plan.audit_host or str(getattr(plan, "target", ""))
    source = getattr(plan, "source", None)  # a restore's: its backup by name (an undo has no Slack command)
    backup = source.name if source is not None and source.kind == "backup" else None
    return " ".join([f"/{policy_operation(plan.operation)}", target, *([backup] if backup else [])])


async def approve_at_terminal(cli: Session, plan: Decidable, *, yes: bool, question: str, refusal_words: str,
                              hint: str) -> PendingPlan:
    """The CLI's approval: ``--yes`` or a "y" at the prompt; otherwise the plan is withdrawn and
    ``Refused`` raised (``refusal_words`` with ``{}`` for why), nothing changed."""
    from commands.plans import withdraw
    from commands.store import approvals
    from commands.vocabulary import PlanState

    plan_only = _plan_only(cli, plan)
    refusal = plan_only or ("" if yes else await confirm(question))
    if plan_only:
        await withdraw(cli.audit, plan, cli.origin.actor, refused=True, reason=plan_only)
        raise Refused(f"not applied: {plan_only}; nothing changed", hint=f"request it in Slack: {_slack_command(plan)}")
    if refusal:
        await withdraw(cli.audit, plan, cli.origin.actor, refused=not sys.stdin.isatty(), reason=refusal)
        raise Refused(refusal_words.format(refusal), hint=hint)
    return await approvals.decide(cli.audit, plan.operation_id, cli.origin.actor, PlanState.APPROVED,
                                  cli.inventory.approvals)
