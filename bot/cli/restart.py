"""``proofbot restart TARGET [--yes] [--json]``: show the plan, ask, restart, prove it took effect.

Without ``--yes`` the plan is confirmed on the terminal; with no terminal to ask on
nothing changes and the exit code is 4 (README "Restart"). While it waits, a live status
line on stderr (when it is a terminal) shows the elapsed time and each signal's state.
TARGET a group: one plan for every host, one confirmation, then a rolling restart with a
line per host as it starts and ends, and the done / failed / untouched lists at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, TextIO

from bot.cli.command import CliCommand
from bot.cli.marks import EXIT_FOR_VERDICT
from bot.cli.output import SCHEMA_VERSION, print_result
from bot.cli.rollout_text import render_rollout_result, rollout_host_done_line
from bot.cli.session import Session, approve_at_terminal, session
from bot.restart_text import progress_line, render_restart_plan, render_rollout_plan
from commands.errors import ProofbotError
from commands.vocabulary import Operation, Verdict

if TYPE_CHECKING:
    from commands.restart import RestartProgress
    from commands.restart.rollout import HostOutcome, RolloutResult

TICK_S = 0.2


async def run(args: argparse.Namespace) -> int:
    from commands.restart import apply_restart, request_restart  # loaded here: verify never needs it

    async with session(args) as cli:
        if cli.inventory.is_group(args.host):
            return await _rollout(cli, args)
        try:
            host = cli.inventory.host(args.host)
        except ProofbotError as exc:
            await cli.refused(Operation.RESTART, args.host, exc)
            raise
        plan = await request_restart(cli.inventory, host, origin=cli.origin, audit=cli.audit)
        print(render_restart_plan(plan), file=sys.stderr if args.json else sys.stdout, flush=True)
        decided = await approve_at_terminal(cli, plan, yes=args.yes, question=f"Restart {plan.service.unit} on "
                                            f"{host.name} now?", refusal_words="not restarted: {}",
                                            hint="pass --yes to restart without asking")
        status = _StatusLine(sys.stderr) if sys.stderr.isatty() else None
        try:
            result = await apply_restart(plan, decided, origin=cli.origin, audit=cli.audit,
                                         on_progress=status.show if status else None)
        finally:
            if status:
                await status.close()
    code = print_result(result, as_json=args.json, verbose=args.verbose, strict=args.strict)
    if not args.json:
        ready = result.extra.get("ready_after_s")
        print(f"  PID {result.extra.get('old_pid')} → {result.extra.get('new_pid') or 'no new PID'}"
              + (f" · ready {ready:.2f} s after the restart command" if ready is not None else " · never ready"))
    return code


EXIT_FOR_ROLLOUT = {**EXIT_FOR_VERDICT, Verdict.REFUSED: 4}


async def _rollout(cli: Session, args: argparse.Namespace) -> int:
    """A group: one plan, one confirmation, hosts restarted batch by batch, each proven before the next."""
    from commands.restart.rollout import apply_rollout, request_rollout  # loaded here: verify never needs it

    target = args.host
    try:
        plan = await request_rollout(cli.inventory, target, origin=cli.origin, audit=cli.audit)
    except ProofbotError as exc:
        await cli.refused(Operation.RESTART, target, exc)
        raise
    out = sys.stderr if args.json else sys.stdout
    print(render_rollout_plan(plan), file=out, flush=True)
    decided = await approve_at_terminal(cli, plan, yes=args.yes, refusal_words="not restarted: {}",
                                        question=f"Restart {len(plan.hosts)} hosts of {target}, "
                                                 f"{plan.restart_batch} at a time?",
                                        hint="pass --yes to restart without asking")

    async def started(host: str, batch: int, batches: int) -> None:
        print(f"  [batch {batch}/{batches}] {host}: restarting…", file=out, flush=True)

    async def done(outcome: HostOutcome) -> None:
        print(rollout_host_done_line(outcome), file=out, flush=True)

    result = await apply_rollout(plan, decided, origin=cli.origin, audit=cli.audit, fleet=cli.inventory.fleet,
                                 on_host_start=started, on_host_done=done)
    return _print_rollout(result, args)


def _print_rollout(result: RolloutResult, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, **result.to_json()}, indent=2, ensure_ascii=False))
    else:
        print(render_rollout_result(result, verbose=args.verbose))
    if args.strict and result.verdict == Verdict.PASS and result.warned:
        return 1
    return EXIT_FOR_ROLLOUT[result.verdict]


class _StatusLine:
    """One line on a terminal, redrawn in place: elapsed time ticks between progress reports."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last: RestartProgress | None = None
        self._at = time.monotonic()
        self._ticker = asyncio.create_task(self._tick())

    async def show(self, progress: RestartProgress) -> None:
        self._last, self._at = progress, time.monotonic()
        self._draw()

    def _draw(self) -> None:
        if self._last is None:
            return
        progress = self._last
        if progress.phase not in ("before", "done"):
            elapsed = progress.elapsed_s + (time.monotonic() - self._at)
            progress = replace(progress, elapsed_s=round(elapsed, 1))
        width = shutil.get_terminal_size((120, 24)).columns - 1  # one line, or \r cannot redraw it
        self._stream.write("\r\x1b[K" + progress_line(progress)[:width])
        self._stream.flush()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self._draw()

    async def close(self) -> None:
        self._ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._ticker
        if self._last is not None:
            self._stream.write("\n")
            self._stream.flush()


COMMAND = CliCommand("restart", run)
