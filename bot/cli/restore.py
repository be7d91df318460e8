"""``proofbot restore HOST [BACKUP]`` and ``proofbot restore HOST --undo SNAPSHOT_DIR``.

Prints the plan, asks on a terminal (``--yes`` skips the question), then applies it.
Without ``--yes`` and without a terminal nothing changes and it exits 4.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from bot.cli.command import CliCommand
from bot.cli.terminal import (
    EXIT_FOR_VERDICT,
    approve_at_terminal,
    print_result,
    session,
)
from bot.plain_text import render_restore_plan, restore_hints
from bot.typed_command import GIVEN, PROGRAM, command_line
from commands.clock import utc_now
from commands.errors import Refused
from commands.findings import Finding
from commands.operation import OperationResult
from commands.vocabulary import Operation

if TYPE_CHECKING:
    from commands.restore import RestorePlan


async def run(args: argparse.Namespace) -> int:
    from commands.restore import apply_restore, request_restore  # loaded here: verify never needs it

    if args.undo and args.backup:
        raise Refused("give either BACKUP or --undo SNAPSHOT_DIR, not both")
    async with session(args) as cli:
        host = cli.inventory.host(args.host)
        plan = await request_restore(cli.inventory, host, backup_name=args.backup, undo_snapshot=args.undo,
                                     origin=cli.origin, audit=cli.audit)
        if not args.json:
            print(render_restore_plan(plan), flush=True)
        if plan.unreadable or not plan.changes:
            return _report_unchanged(plan, as_json=args.json)
        decided = await approve_at_terminal(cli, plan, yes=args.yes, question=f"Apply this plan to {host.name} "
                                            f"({len(plan.changes)} file(s))?",
                                            refusal_words="not applied: {}; nothing changed",
                                            hint="run again with --yes to apply")
        result = await apply_restore(plan, decided, actor=cli.origin.actor, audit=cli.audit,
                                     move_extras=args.move_extras, on_step=None if args.json else _show_step)
    code = print_result(result, as_json=args.json, verbose=args.verbose, strict=args.strict)
    if not args.json:
        print(f"snapshot: {result.extra['snapshot_dir'] or '(none made)'}  ·  restored: "
              f"{', '.join(result.extra['restored']) or 'nothing'}")
        if result.extra["snapshot_dir"]:
            print(f"undo with: {command_line(Operation.RESTORE, host.name, '--undo', result.extra['snapshot_dir'])}")
        program, flags = PROGRAM.get(), GIVEN.get()
        undo = [program, Operation.RESTORE, host.name, "--undo", result.extra["snapshot_dir"], *flags] \
            if result.extra["snapshot_dir"] and not args.undo else None
        again = [program, Operation.RESTORE, host.name, *([args.backup] if args.backup else []), *flags]
        restart = [program, Operation.RESTART, host.name, *flags]
        for hint in restore_hints(result, restart=restart, undo=undo, again=again):
            print(hint)
    return code


async def _show_step(finding: Finding) -> None:
    print(f"  … {finding.name}: {finding.status} — {finding.summary}", file=sys.stderr, flush=True)


def _report_unchanged(plan: RestorePlan, *, as_json: bool) -> int:
    result = OperationResult(plan.operation_id, plan.operation, plan.host.name, utc_now(), 0.0,
                             plan.unapplied_findings(),
                             extra={"snapshot_dir": "", "restored": []})
    if as_json:
        return print_result(result, as_json=True, verbose=False)
    print("nothing differs: nothing to restore" if not plan.unreadable else "cannot restore: source unreadable")
    return EXIT_FOR_VERDICT[result.verdict]


COMMAND = CliCommand(Operation.RESTORE, run)
