"""``proofbot verify HOST [--backup NAME] [--json]``: run every check and print the evidence."""

from __future__ import annotations

import argparse

from bot.cli.command import CliCommand
from bot.cli.terminal import add_host_and_output_arguments, print_result, session
from commands.errors import UsageError
from commands.verify import VerifyPlan, verify


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_and_output_arguments(parser)
    parser.add_argument("--backup", metavar="NAME", help="backup to compare with (default: the only one)")
    parser.add_argument("--no-probe", action="store_true",
                        help="do not send the inventory's probe (one real request); it is reported skipped")


async def run(args: argparse.Namespace) -> int:
    async with session(args) as cli:
        try:
            plan = VerifyPlan.for_host(cli.inventory.host(args.host), args.backup, send_probe=not args.no_probe)
        except UsageError as exc:
            await cli.refused("verify", args.host, exc)
            raise
        result = await verify(plan, origin=cli.origin, audit=cli.audit)
    return print_result(result, as_json=args.json, verbose=args.verbose, strict=args.strict)


COMMAND = CliCommand("verify", add_arguments, run)
