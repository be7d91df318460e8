"""``proofbot verify HOST [--backup NAME] [--json]``: run every check and print the evidence."""

from __future__ import annotations

import argparse

from bot.cli.command import CliCommand
from bot.cli.terminal import audit_of, inventory_of, print_result, record_refusal
from commands.errors import UsageError
from commands.operation import Origin
from commands.verify import VerifyPlan, verify


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("host", metavar="HOST")
    parser.add_argument("--backup", metavar="NAME", help="backup to compare with (default: the only one)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the evidence of passing checks too")


async def run(args: argparse.Namespace) -> int:
    inventory = inventory_of(args)
    audit = audit_of(args)
    origin = Origin.local_user()
    try:
        try:
            plan = VerifyPlan.for_host(inventory.host(args.host), args.backup)
        except UsageError as exc:
            await record_refusal(audit, "verify", origin, args.host, exc)
            raise
        result = await verify(plan, origin=origin, audit=audit)
    finally:
        audit.close()
    return print_result(result, as_json=args.json, verbose=args.verbose)


COMMAND = CliCommand("verify", add_arguments, run)
