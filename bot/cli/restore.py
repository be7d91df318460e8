"""``proofbot restore HOST [BACKUP]`` and ``proofbot restore HOST --undo SNAPSHOT_DIR``.

Prints the plan, asks on a terminal (``--yes`` skips the question), then applies it.
Without ``--yes`` and without a terminal nothing changes and it exits 4.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from bot.plain_text import render_restore_plan, render_result
from commands.errors import Refused
from commands.findings import Finding
from commands.inventory import Inventory
from commands.operation import OperationResult, Origin, utc_now
from commands.registry import OperationSpec
from commands.restore.plan import RestorePlan
from commands.restore.run import apply_restore, request_restore
from commands.store import approvals
from commands.store.events import AuditStore, db_path

EXIT_FOR_VERDICT = {"pass": 0, "fail": 1, "error": 3}


def add_restore_parser(sub: Any, spec: OperationSpec, shared: argparse.ArgumentParser) -> None:
    command = sub.add_parser(spec.name, parents=[shared], help=spec.summary, description=spec.summary)
    command.add_argument("host", metavar="HOST")
    command.add_argument("backup", nargs="?", metavar="BACKUP", help="backup name (default: the only one)")
    command.add_argument("--undo", metavar="SNAPSHOT_DIR", help="put back a snapshot an earlier restore kept")
    command.add_argument("--yes", action="store_true", help="apply without asking")
    command.add_argument("--move-extras", action="store_true",
                         help="also move extra files found in the watch dirs into the snapshot")
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.add_argument("-v", "--verbose", action="store_true", help="show the evidence of passing steps too")


async def run_restore(args: argparse.Namespace, inventory: Inventory) -> int:
    if args.undo and args.backup:
        raise Refused("give either BACKUP or --undo SNAPSHOT_DIR, not both")
    host = inventory.host(args.host)
    audit = AuditStore.open(db_path(getattr(args, "db", None)))
    origin = Origin.local_user()
    try:
        plan = await request_restore(inventory, host, backup_name=args.backup, undo_snapshot=args.undo,
                                     origin=origin, audit=audit)
        if not args.json:
            print(render_restore_plan(plan), flush=True)
        if plan.unreadable or not plan.changes:
            return _report_unchanged(plan, as_json=args.json)
        if not await _confirmed(args, plan):
            reason = "declined at the prompt" if sys.stdin.isatty() else "no --yes and no terminal to ask on"
            await approvals.close_unapplied(audit, plan.operation_id, origin.actor, "rejected", reason)
            raise Refused(f"not applied: {reason}; nothing changed", hint="run again with --yes to apply")
        await approvals.decide(audit, plan.operation_id, origin.actor, "approved", inventory.approvals)
        result = await apply_restore(inventory, plan.operation_id, actor=origin.actor, audit=audit,
                                     move_extras=args.move_extras, on_step=None if args.json else _show_step)
    finally:
        audit.close()
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        print(render_result(result, verbose=args.verbose))
        print(f"snapshot: {result.extra['snapshot_dir'] or '(none made)'}  ·  restored: "
              f"{', '.join(result.extra['restored']) or 'nothing'}")
        if result.extra["snapshot_dir"]:
            print(f"undo with: proofbot restore {host.name} --undo {result.extra['snapshot_dir']}")
    return EXIT_FOR_VERDICT[result.verdict]


async def _confirmed(args: argparse.Namespace, plan: RestorePlan) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        return False
    answer = await asyncio.to_thread(input, f"Apply this plan to {plan.host.name} ({len(plan.changes)} file(s))? "
                                            "[y/N] ")
    return answer.strip().lower() in ("y", "yes")


async def _show_step(finding: Finding) -> None:
    print(f"  … {finding.name}: {finding.status} — {finding.summary}", file=sys.stderr, flush=True)


def _report_unchanged(plan: RestorePlan, *, as_json: bool) -> int:
    checks = [Finding(f"file:{f.name}", "pass" if f.state == "same" else "error",
                      "identical: nothing to restore" if f.state == "same" else f"cannot plan: {f.problem}",
                      plan.evidence[3 * index]) for index, f in enumerate(plan.files)]
    result = OperationResult(plan.operation_id, "restore", plan.host.name, utc_now(), 0.0, checks,
                             extra={"snapshot_dir": "", "restored": []})
    if as_json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        print("nothing differs: nothing to restore" if not plan.unreadable else "cannot restore: source unreadable")
    return EXIT_FOR_VERDICT[result.verdict]
