"""The ``proofbot`` command line: one subcommand per registry operation, plus serve and demo.

Exit codes and JSON as README "Using it" says; every ``ProofbotError`` is printed once,
here, with its hint, and exits with its code.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from bot.cli import started
from bot.cli.arguments import OPERATION_ARGUMENTS, inventory_arguments, ping_arguments
from bot.cli.command import CliCommand
from bot.cli.output import SCHEMA_VERSION
from bot.cli.session import inventory_of
from bot.typed_command import GIVEN, PROGRAM, given_options, typed_program
from commands.errors import InventoryError, ProofbotError, UsageError
from commands.registry import OPERATIONS
from commands.vocabulary import Operation

if set(OPERATION_ARGUMENTS) != {spec.name for spec in OPERATIONS}:  # the registry is the list; the CLI follows it
    raise ImportError(f"CLI commands {sorted(OPERATION_ARGUMENTS)} differ from the registry's operations")


def cli_command(name: str) -> CliCommand:
    """The operation's CLI module (``bot.cli.<name>``), loaded when it runs: each loads only its own code."""
    command: CliCommand = importlib.import_module(f"bot.cli.{name}").COMMAND
    if command.name != name:
        raise ImportError(f"bot.cli.{name} defines the command {command.name!r}")
    return command


SERVE_HELP = """environment:
  SLACK_BOT_TOKEN        the Bot User OAuth Token (xoxb-…); always needed, checked with Slack at start
  SLACK_APP_TOKEN        Socket Mode (the default): an app-level token (xapp-…) with connections:write
  SLACK_SIGNING_SECRET   HTTP mode (--http): every request's signature is checked with it
  PROOFBOT_INVENTORY     the inventory file, unless --inventory is given (default ./inventory.yml)
  PROOFBOT_DB            the audit database, unless --db is given (default ./proofbot.db)
  PROOFBOT_LOG_FORMAT    text (the default) or json: one JSON object per log line
One serve per audit database; SIGTERM or Ctrl-C stops it at any moment."""
DEMO_HELP = """No root, no Slack account, no network: an in-process SSH server on 127.0.0.1, a real
supervisord and a stand-in inference server laid out as the seed's ct129. Its audit log goes
to its own database (default ./proofbot-demo.db), never to a deployment's ./proofbot.db."""


class _Parser(argparse.ArgumentParser):
    """Bad usage is a UsageError like any other, so ``--json`` can report it as JSON too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, hint=f"see `{self.prog} --help`")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; ``only`` (a registry operation named first on the command line): just its own, which
    parses and helps exactly as in the whole parser (each subcommand's parser is its own) at a fraction of the cost."""
    shared = _Parser(add_help=False)
    shared.add_argument("--inventory", default=argparse.SUPPRESS,
                        help="inventory file (default: $PROOFBOT_INVENTORY or ./inventory.yml)")
    shared.add_argument("--db", default=argparse.SUPPRESS,
                        help="audit database: a SQLite file or a postgresql:// URL (default: $PROOFBOT_DB or "
                             "./proofbot.db)")
    parser = _Parser(prog="proofbot", parents=[shared],
                     description="Restore, restart and prove each change took effect.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for spec in OPERATIONS:
        if only is not None and spec.name != only:
            continue
        arguments = OPERATION_ARGUMENTS[spec.name]
        arguments.add(sub.add_parser(spec.name, parents=[shared], help=spec.summary,
                                     description=spec.summary, epilog=arguments.epilog or None))
    if only is not None:
        return parser
    serve = sub.add_parser("serve", parents=[shared], help="run the Slack bot (Socket Mode by default)",
                           description="Run the Slack bot: Socket Mode by default, HTTP mode with --http.",
                           epilog=SERVE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--http", type=int, metavar="PORT", help="HTTP mode: receive events at /slack/events")
    serve.add_argument("--host", default="0.0.0.0", help="HTTP mode bind address")
    serve.add_argument("--metrics-port", type=_port, metavar="PORT",
                       help="serve Prometheus metrics at http://ADDRESS:PORT/metrics (off by default)")
    serve.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDRESS",
                       help="the address /metrics listens on (default 127.0.0.1: this machine only)")
    serve.add_argument("--check", action="store_true",
                       help="exit 0 if a serve is running on this audit database, else 1 (a health check)")
    ping = sub.add_parser(Operation.PING, parents=[shared],
                          help="reach each host, check its key, run `true`; change nothing")
    ping_arguments(ping)
    watch = sub.add_parser(Operation.WATCH, parents=[shared],
                           help="re-verify the inventory's watch entries on their schedule; say only what changes")
    watch.add_argument("--once", action="store_true",
                       help="verify every watched target once and exit with verify's code (cron, CI)")
    inventory = sub.add_parser("inventory", parents=[shared],
                               help="`inventory check`: validate; `inventory show HOST`: its SSH values and their "
                                    "origins; connect to nothing")
    inventory_arguments(inventory)
    demo = sub.add_parser("demo", help="the whole story against a local lab host, no Slack needed",
                          description="Play the seed's story end to end and print it as the Slack threads read.",
                          epilog=DEMO_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--db", default="proofbot-demo.db", type=_absolute,
                      help="the demo's audit database (default: ./proofbot-demo.db)")
    demo.add_argument("--keep", action="store_true",
                      help="leave the lab host running (until Ctrl-C) and write its inventory beside the database,"
                           " so the commands printed at the end work as printed")
    return parser


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError("PORT must be a whole number from 1 to 65535")
    return int(text)


def _absolute(text: str) -> Path:
    return Path(os.path.abspath(text))


class _VersionAction(argparse.Action):
    """``--version``, read from the installed metadata only when asked (importlib.metadata costs
    every other command ~20 ms of start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> NoReturn:
        import importlib.metadata

        try:
            version = importlib.metadata.version("proofbot")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        print(f"proofbot {version}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def console_main() -> NoReturn:
    """The ``proofbot`` script: ``main``, then exit without tearing the interpreter down.

    Everything that must reach disk or the terminal is done by then (the audit log is closed
    inside ``main``, output is flushed here); the teardown of every loaded module would only
    add ~70 ms to each command, most of a one-host verify's cost above the floor.
    """
    PROGRAM.set(typed_program(sys.argv[0]))
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        # `proofbot verify …` (the command first, as usual): only that command's parser is built
        args = build_parser(words[0] if words and words[0] in OPERATION_ARGUMENTS else None).parse_args(words)
        if args.command != "demo":  # the demo prints its own inventory and database with its commands
            GIVEN.set(given_options(getattr(args, "inventory", None), getattr(args, "db", None)))
        return asyncio.run(_dispatch(args))
    except ProofbotError as exc:
        if "--json" in words:  # one JSON object on stdout, errors included
            problems = {"problems": exc.problems} if isinstance(exc, InventoryError) and exc.problems else {}
            print(json.dumps({"schema_version": SCHEMA_VERSION, "error": {
                "code": exc.exit_code, "message": exc.message, "hint": exc.hint, **problems}},
                indent=2, ensure_ascii=False))
        lines = exc.message.splitlines()
        if len(lines) > 1:  # every inventory problem at once, each FILE:LINE: as editors and grep read it
            print(f"proofbot: {exc.hint or 'problems'}:", *lines, sep="\n", file=sys.stderr)
            return exc.exit_code
        print(f"proofbot: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  → {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("proofbot: interrupted", file=sys.stderr)
        return 130


# The commands that open a session at once: the cyclic GC starts when it is open (``bot.cli.session``), after the
# command's modules and inventory are loaded; every other command starts it here, before it runs.
_OPENS_A_SESSION = (Operation.VERIFY, Operation.RESTART, Operation.RESTORE)


async def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from bot.demo.story import run_demo  # the lab host is only loaded for the demo

        started()
        return await run_demo(args.db, keep=args.keep)
    if args.command == "serve":
        from bot.slack.serve import MetricsAt, is_served, serve  # Slack's libraries are only loaded for serve
        from commands.store.db import db_path, db_target

        if args.check:
            return 0 if is_served(db_path(getattr(args, "db", None))) else 1
        metrics_at = MetricsAt(args.metrics_port, args.metrics_address) if args.metrics_port else None
        inventory = inventory_of(args)
        started(freeze=False)  # a process that runs for months keeps the normal GC over everything
        return await serve(inventory, db_target(getattr(args, "db", None)), http_port=args.http,
                           bind=args.host, metrics_at=metrics_at)
    if args.command == Operation.WATCH:
        from bot.cli.watch import run_watch

        started(freeze=args.once)  # a watch that runs on keeps the normal GC, as serve; once (cron) is a verify
        return await run_watch(args)
    if args.command not in _OPENS_A_SESSION:
        started()
    if args.command in (Operation.PING, "inventory"):
        if args.command == Operation.PING:
            from bot.cli.ping import run_ping

            return await run_ping(args)
        if args.action == "show":
            from bot.cli.inventory_show import run_show

            return await run_show(args)
        from bot.cli.inventory_check import run_inventory

        return await run_inventory(args)
    return await cli_command(args.command).run(args)


if __name__ == "__main__":
    sys.exit(main())
