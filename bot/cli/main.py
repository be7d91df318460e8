"""The ``proofbot`` command line: verify, serve and demo, with SPEC.md's exit codes and JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from bot.cli.audit import add_audit_parser, run_audit
from bot.cli.restart import add_restart_parser, run_restart
from bot.cli.restore import add_restore_parser, run_restore
from bot.plain_text import render_result
from commands.errors import ProofbotError, UsageError
from commands.inventory import inventory_path, load_inventory
from commands.operation import OperationResult, Origin
from commands.registry import OPERATIONS
from commands.store.events import AuditStore, db_path
from commands.verify.run import VerifyPlan, verify

EXIT_FOR_VERDICT = {"pass": 0, "fail": 1, "error": 3}


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
        if spec.name == "restart":
            add_restart_parser(sub, shared)
            continue
        if spec.name == "audit":
            add_audit_parser(sub, spec, shared)
            continue
        if spec.name == "restore":
            add_restore_parser(sub, spec, shared)
            continue
        command = sub.add_parser(spec.name, parents=[shared], help=spec.summary, description=spec.summary)
        command.add_argument("host", metavar="HOST")
        if spec.name == "verify":
            command.add_argument("--backup", metavar="NAME", help="backup to compare with (default: the only one)")
        command.add_argument("--json", action="store_true", help="print one JSON object")
        command.add_argument("-v", "--verbose", action="store_true", help="show the evidence of passing checks too")
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
        from bot.demo.story import run_demo

        return await run_demo(getattr(args, "db", None))
    if args.command == "audit":
        return await run_audit(args)
    inventory = load_inventory(inventory_path(getattr(args, "inventory", None)))
    if args.command == "serve":
        from bot.slack.serve import serve

        return await serve(inventory, db_path(getattr(args, "db", None)), http_port=args.http, bind=args.host)
    if args.command == "restart":
        return await run_restart(args, inventory)
    if args.command == "restore":
        return await run_restore(args, inventory)
    audit = AuditStore.open(db_path(getattr(args, "db", None)))
    origin = Origin.local_user()
    try:
        try:
            plan = VerifyPlan.for_host(inventory.host(args.host), args.backup)
        except UsageError as exc:
            await audit.append("refused", operation=args.command, actor=origin.actor,
                               details={"reason": str(exc), "requested_host": args.host,
                                        "origin": origin.to_json()})
            raise
        result = await verify(plan, origin=origin, audit=audit)
    finally:
        audit.close()
    _print(result, as_json=args.json, verbose=args.verbose)
    return EXIT_FOR_VERDICT[result.verdict]


def _print(result: OperationResult, *, as_json: bool, verbose: bool) -> None:
    if as_json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        print(render_result(result, verbose=verbose))


if __name__ == "__main__":
    sys.exit(main())
