"""``proofbot verify TARGET... [--backup NAME] [--json]``: run every check and print the evidence.

One host named alone reads as it always has (one result, its JSON). A group, or several
targets, is a fleet (``commands.verify.fleet``): hosts verified concurrently under
``fleet.max_parallel``, each within ``fleet.host_deadline_s``, printed grouped by outcome
(``bot.cli.fleet_view``), exit code the worst host's.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, NamedTuple

from bot.cli.command import CliCommand
from bot.cli.output import json_text, print_result
from bot.cli.session import Session, inventory_of, load_meanwhile, session
from commands.errors import UsageError
from commands.inventory import Host, Inventory
from commands.ssh import connect_ahead
from commands.verify.plan import FleetPlan, VerifyPlan, plan_fleet
from commands.vocabulary import Operation

if TYPE_CHECKING:
    from commands.operation import OperationResult
    from commands.verify.fleet import OnHostDone

# What a verify runs and prints with: loaded in a worker thread while the SSH handshake is in flight.
RUNNING_PARTS = ("commands.verify.operation", "commands.verify.fleet", "bot.cli.fleet_view",
                 "bot.cli.results_text", "commands.host_http")  # health and the probe: else each host loads it


class _Asked(NamedTuple):
    """What the command line asks, planned: one host named alone (``one``), or a fleet."""

    target: str
    hosts: list[Host]
    one: VerifyPlan | None = None
    fleet: FleetPlan | None = None


async def run(args: argparse.Namespace) -> int:
    inventory = inventory_of(args)
    try:
        asked, refusal = _plan(inventory, args), None
    except UsageError as exc:
        asked, refusal = None, exc
    if asked is not None:  # a refused request logs in nowhere
        connect_ahead(asked.hosts[:inventory.fleet.max_parallel])  # the ones the fleet runner starts first
    await load_meanwhile(*RUNNING_PARTS)
    async with session(args, inventory) as cli:
        if asked is None:
            assert refusal is not None
            await cli.refused(Operation.VERIFY, " ".join(args.targets), refusal)
            raise refusal
        if asked.one is not None:
            return await _one_host(cli, args, asked.one)
        assert asked.fleet is not None
        return await _fleet(cli, args, asked, asked.fleet)


def _plan(inventory: Inventory, args: argparse.Namespace) -> _Asked:
    target = " ".join(args.targets)
    if len(args.targets) == 1 and target in inventory.hosts:
        host = inventory.host(target)
        return _Asked(target, [host], one=VerifyPlan.for_host(host, args.backup, send_probe=not args.no_probe,
                                                                   alone=True))
    hosts = inventory.targets(args.targets)
    if not hosts:
        raise UsageError(f"{target!r} names no hosts", hint="add hosts to the group in the inventory")
    return _Asked(target, hosts, fleet=plan_fleet(hosts, args.backup, send_probe=not args.no_probe))


async def _one_host(cli: Session, args: argparse.Namespace, plan: VerifyPlan) -> int:
    from commands.verify.operation import verify

    result = await verify(plan, origin=cli.origin, audit=cli.audit)
    return print_result(result, as_json=args.json, verbose=args.verbose, strict=args.strict)


async def _fleet(cli: Session, args: argparse.Namespace, asked: _Asked, planned: FleetPlan) -> int:
    from bot.cli.fleet_view import fleet_exit_code, fleet_json, render_fleet
    from commands.verify.fleet import verify_fleet

    hosts = asked.hosts
    fleet = await verify_fleet(planned.plans, target=asked.target, origin=cli.origin, audit=cli.audit,
                               fleet=cli.inventory.fleet, without_backup=planned.without_backup,
                               on_host_done=_live_progress([host.name for host in hosts]))
    if sys.stderr.isatty():
        print("\r\x1b[K", end="", file=sys.stderr, flush=True)  # the live line gives way to the summary
    if args.json:
        print(json_text(fleet_json(fleet, without_backup=planned.without_backup)))
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


COMMAND = CliCommand(Operation.VERIFY, run)
