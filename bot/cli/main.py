"""The ``proofbot`` command line: one subcommand per registry operation, plus serve and demo.

Exit codes and JSON as README "Using it" says; every ``ProofbotError`` is printed once,
here, with its hint, and exits with its code.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from bot.cli import audit, restart, restore, verify
from bot.cli.command import CliCommand
from bot.cli.terminal import inventory_of
from commands.errors import ProofbotError
from commands.registry import OPERATIONS
from commands.store.events import db_path

COMMANDS: dict[str, CliCommand] = {c.name: c for c in (verify.COMMAND, restore.COMMAND, restart.COMMAND,
                                                       audit.COMMAND)}
if set(COMMANDS) != {spec.name for spec in OPERATIONS}:  # the registry is the list; the CLI follows it
    raise ImportError(f"CLI commands {sorted(COMMANDS)} differ from the registry's operations")


def build_parser() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--inventory", default=argparse.SUPPRESS,
                        help="inventory file (default: $PROOFBOT_INVENTORY or ./inventory.yml)")
    shared.add_argument("--db", default=argparse.SUPPRESS,
                        help="audit database (default: $PROOFBOT_DB or ./proofbot.db)")
    parser = argparse.ArgumentParser(prog="proofbot", parents=[shared],
                                     description="Restore, restart and prove each change took effect.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for spec in OPERATIONS:
        command = COMMANDS[spec.name]
        command.add_arguments(sub.add_parser(spec.name, parents=[shared], help=spec.summary,
                                             description=spec.summary, epilog=command.epilog or None))
    serve = sub.add_parser("serve", parents=[shared], help="run the Slack bot (Socket Mode by default)")
    serve.add_argument("--http", type=int, metavar="PORT", help="HTTP mode: receive events at /slack/events")
    serve.add_argument("--host", default="0.0.0.0", help="HTTP mode bind address")
    sub.add_parser("demo", parents=[shared], help="the whole story against a local lab host, no Slack needed")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(_dispatch(args))
    except ProofbotError as exc:
        print(f"proofbot: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  → {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("proofbot: interrupted", file=sys.stderr)
        return 130


async def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from bot.demo.story import run_demo  # the lab host is only loaded for the demo

        return await run_demo(getattr(args, "db", None))
    if args.command == "serve":
        from bot.slack.serve import serve  # Slack's libraries are only loaded for serve

        return await serve(inventory_of(args), db_path(getattr(args, "db", None)), http_port=args.http,
                           bind=args.host)
    return await COMMANDS[args.command].run(args)


if __name__ == "__main__":
    sys.exit(main())
