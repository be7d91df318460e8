"""``proofbot watch [--once]``: the inventory's ``watch`` entries from a terminal, cron or CI. ``--once`` verifies
every entry's target once and exits with verify's codes; without it the watch runs until interrupted,
printing each announcement (``serve`` posts them to Slack)."""

from __future__ import annotations

import argparse
from collections import Counter

from bot.cli.marks import EXIT_FOR_VERDICT
from bot.cli.session import inventory_of, session
from bot.watch_text import announcement_text
from bot.words import counts_words
from commands.errors import UsageError
from commands.fleet.grouping import outcome_of
from commands.inventory.watch import WatchEntry
from commands.verify.fleet import FleetResult
from commands.vocabulary import Verdict
from commands.watch.audit import WatchAudit
from commands.watch.fleet import fleet_verifier
from commands.watch.holds import LockHolds
from commands.watch.memory import restore_watch
from commands.watch.schedule import TargetRun, Watch
from commands.watch.state import Announcement


async def run_watch(args: argparse.Namespace) -> int:
    inventory = inventory_of(args)
    if not inventory.watch:
        raise UsageError(f"{inventory.path} has no watch entries",
                         hint="add e.g. watch: [{target: all, every: 5m, channel: C0123ABCD}]")

    def said(run: TargetRun) -> None:
        for announcement in run.said:
            print(announcement_text(announcement), flush=True)
        counts = Counter[str](outcome_of(result) for result in run.results)
        print(f"{run.at:%Y-%m-%d %H:%M:%S} watch {run.target}: {counts_words(counts)}", flush=True)

    async def posted(_entry: WatchEntry, _announcement: Announcement, _fleet: FleetResult) -> None:
        """Printed with its run's counts (``said``), so a run's lines stay together though entries run at once."""

    async with session(args, inventory) as cli:
        # --once is a verify of each target (its whole trail kept, as `proofbot verify`'s); a watch that runs on
        # keeps the trails of the hosts that changed only. Both keep a compact event per run, from which the next
        # run (a cron's, a restarted watch's) takes up each host's state: a known failure is not said again.
        recorded = WatchAudit(cli.audit, inventory, cli.origin, trails=not args.once)

        async def on_run(run: TargetRun) -> None:
            if not args.once:
                said(run)
            await recorded.record(run)

        watch = Watch(inventory.watch, fleet_verifier(inventory, cli.audit if args.once else None, cli.origin),
                      posted, held_until=LockHolds(inventory, cli.audit), on_run=on_run)
        await restore_watch(watch, cli.audit)
        if not args.once:
            await watch.run_forever()  # until interrupted (exit 130)
        runs = await watch.run_once()
        for run in runs:  # in the order the entries are written
            said(run)
    return EXIT_FOR_VERDICT[Verdict.worst(run.verdict for run in runs)]
