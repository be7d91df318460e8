"""``proofbot restore HOST [BACKUP]`` and ``proofbot restore HOST --undo SNAPSHOT_DIR``.

Prints the plan, asks on a terminal (``--yes`` skips the question), then applies it.
Without ``--yes`` and without a terminal nothing changes and it exits 4.
"""

from __future__ import annotations

import argparse
import sys

from bot.cli.command import CliCommand
from bot.cli.terminal import EXIT_FOR_VERDICT, audit_of, confirm, inventory_of, print_result
from bot.plain_text import render_restore_plan
from commands.errors import Refused
from commands.findings import Finding
from commands.operation import OperationResult, Origin, utc_now
from commands.plans import withdraw
from commands.restore import RestorePlan, apply_restore, request_restore
from commands.store import approvals


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("host", metavar="HOST")
    parser.add_argument("backup", nargs="?", metavar="BACKUP", help="backup name (default: the only one)")
    parser.add_argument("--undo", metavar="SNAPSHOT_DIR", help="put back a snapshot an earlier restore kept")
    parser.add_argument("--yes", action="store_true", help="apply without asking")
    parser.add_argument("--move-extras", action="store_true",
                        help="also move extra files found in the watch dirs into the snapshot")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the evidence of passing steps too")


async def run(args: argparse.Namespace) -> int:
    if args.undo and args.backup:
        raise Refused("give either BACKUP or --undo SNAPSHOT_DIR, not both")
    inventory = inventory_of(args)
    host = inventory.host(args.host)
    audit = audit_of(args)
    origin = Origin.local_user()
    try:
        plan = await request_restore(inventory, host, backup_name=args.backup, undo_snapshot=args.undo,
                                     origin=origin, audit=audit)
        if not args.json:
            print(render_restore_plan(plan), flush=True)
        if plan.unreadable or not plan.changes:
            return _report_unchanged(plan, as_json=args.json)
        refusal = "" if args.yes else await confirm(f"Apply this plan to {host.name} ({len(plan.changes)} file(s))?")
        if refusal:
            await withdraw(audit, plan, origin.actor, refused=not sys.stdin.isatty(), reason=refusal)
            raise Refused(f"not applied: {refusal}; nothing changed", hint="run again with --yes to apply")
        decided = await approvals.decide(audit, plan.operation_id, origin.actor, "approved", inventory.approvals)
        result = await apply_restore(plan, decided, actor=origin.actor, audit=audit, move_extras=args.move_extras,
                                     on_step=None if args.json else _show_step)
    finally:
        audit.close()
    code = print_result(result, as_json=args.json, verbose=args.verbose)
    if not args.json:
        print(f"snapshot: {result.extra['snapshot_dir'] or '(none made)'}  ·  restored: "
              f"{', '.join(result.extra['restored']) or 'nothing'}")
        if result.extra["snapshot_dir"]:
            print(f"undo with: proofbot restore {host.name} --undo {result.extra['snapshot_dir']}")
    return code


async def _show_step(finding: Finding) -> None:
    print(f"  … {finding.name}: {finding.status} — {finding.summary}", file=sys.stderr, flush=True)


def _report_unchanged(plan: RestorePlan, *, as_json: bool) -> int:
    checks = [Finding(f"file:{f.name}", "pass" if f.state == "same" else "error",
                      "identical: nothing to restore" if f.state == "same" else f"cannot plan: {f.problem}",
                      plan.evidence[3 * index]) for index, f in enumerate(plan.files)]
    result = OperationResult(plan.operation_id, plan.operation, plan.host.name, utc_now(), 0.0, checks,
                             extra={"snapshot_dir": "", "restored": []})
    if as_json:
        return print_result(result, as_json=True, verbose=False)
    print("nothing differs: nothing to restore" if not plan.unreadable else "cannot restore: source unreadable")
    return EXIT_FOR_VERDICT[result.verdict]


COMMAND = CliCommand("restore", add_arguments, run)
