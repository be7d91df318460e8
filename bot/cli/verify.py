"""``proofbot verify TARGET... [--backup NAME] [--json]``: run every check and print the evidence.

One host named alone reads as it always has (one result, its JSON). A group, or several
targets, is a fleet (``commands.verify.fleet``): hosts verified concurrently under
``fleet.max_parallel``, each within ``fleet.host_deadline_s``, printed grouped by outcome
(``bot.cli.fleet_view``), exit code the worst host's.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from bot.cli.command import CliCommand
from bot.cli.terminal import Session, inventory_of, load_meanwhile, print_result, session
from commands.errors import ProofbotError, UsageError
from commands.inventory import Host, Inventory
from commands.ssh import connect_ahead
from commands.verify.plan import VerifyPlan, plan_fleet

if TYPE_CHECKING:
    from commands.operation import OperationResult
    from commands.verify.fleet import OnHostDone

# What a verify runs and prints with: loaded in a worker thread while the SSH handshake is in flight.
RUNNING_PARTS = ("commands.verify.operation", "commands.verify.fleet", "bot.cli.fleet_view", "bot.plain_text")


async def run(args: argparse.Namespace) -> int:
    inventory = inventory_of(args)
    connect_ahead(_hosts_to_reach(inventory, args))
    await load_meanwhile(*RUNNING_PARTS)
    async with session(args, inventory) as cli:
        if len(args.targets) == 1 and args.targets[0] in cli.inventory.hosts:
            return await _one_host(cli, args)
        return await _fleet(cli, args)


def _hosts_to_reach(inventory: Inventory, args: argparse.Namespace) -> list[Host]:
    """The hosts this verify will connect to first, when its request is valid (else none: the
    refusal is said and audited as usual, and no host sees a login)."""
    try:
        hosts = inventory.targets(args.targets)
        if len(args.targets) == 1 and args.targets[0] in inventory.hosts:
            VerifyPlan.for_host(hosts[0], args.backup, send_probe=not args.no_probe)
        else:
            plan_fleet(hosts, args.backup, send_probe=not args.no_probe)
    except ProofbotError:
        return []
    return hosts[:inventory.fleet.max_parallel]  # the ones the fleet runner starts first


async def _one_host(cli: Session, args: argparse.Namespace) -> int:
    name = args.targets[0]
    try:
        plan = VerifyPlan.for_host(cli.inventory.host(name), args.backup, send_probe=not args.no_probe)
    except UsageError as exc:
        await cli.refused("verify", name, exc)
        raise
    from commands.verify.operation import verify

    result = await verify(plan, origin=cli.origin, audit=cli.audit)
    return print_result(result, as_json=args.json, verbose=args.verbose, strict=args.strict)


async def _fleet(cli: Session, args: argparse.Namespace) -> int:
    from bot.cli.fleet_view import fleet_exit_code, fleet_json, render_fleet
    from commands.verify.fleet import verify_fleet

    target = " ".join(args.targets)
    try:
        hosts = cli.inventory.targets(args.targets)
        if not hosts:
            raise UsageError(f"{target!r} names no hosts", hint="add hosts to the group in the inventory")
        planned = plan_fleet(hosts, args.backup, send_probe=not args.no_probe)
    except UsageError as exc:
        await cli.refused("verify", target, exc)
        raise
    fleet = await verify_fleet(planned.plans, target=target, origin=cli.origin, audit=cli.audit,
                               fleet=cli.inventory.fleet, without_backup=planned.without_backup,
                               on_host_done=_live_progress([host.name for host in hosts]))
    if sys.stderr.isatty():
        print("\r\x1b[K", end="", file=sys.stderr, flush=True)  # the live line gives way to the summary
    if args.json:
        print(json.dumps(fleet_json(fleet, without_backup=planned.without_backup), indent=2, ensure_ascii=False))
    else:
        print(render_fleet(fleet, addresses={host.name: host.address for host in hosts},
                           without_backup=planned.without_backup, verbose=args.verbose))
    return fleet_exit_code(fleet, strict=args.strict)


def _live_progress(hosts: list[str]) -> OnHostDone | None:
    """On a terminal, one line on stderr rewritten as each host finishes (stdout stays the summary)."""
    if not sys.stderr.isatty():
        return None
    from bot.cli.fleet_view import progress_text

    done: list[OperationResult] = []
    print(progress_text(done, hosts), end="", file=sys.stderr, flush=True)

    async def show(result: OperationResult) -> None:
        done.append(result)
        print(f"\r\x1b[K{progress_text(done, hosts)}", end="", file=sys.stderr, flush=True)

    return show


COMMAND = CliCommand("verify", run)
