"""``proofbot restart HOST [--yes] [--json]``: show the plan, ask, restart, prove it took effect.

Without ``--yes`` the plan is confirmed on the terminal; with no terminal to ask on
nothing changes and the exit code is 4 (README "Restart"). While it waits, a live status
line on stderr (when it is a terminal) shows the elapsed time and each signal's state.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import time
from dataclasses import replace
from typing import TextIO

from bot.cli.command import CliCommand
from bot.cli.terminal import audit_of, confirm, inventory_of, print_result, record_refusal
from bot.plain_text import progress_line, render_restart_plan
from commands.errors import ProofbotError, Refused
from commands.operation import Origin
from commands.plans import withdraw
from commands.restart import RestartProgress, apply_restart, request_restart
from commands.store import approvals

TICK_S = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("host", metavar="HOST")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the evidence of passing checks too")


async def run(args: argparse.Namespace) -> int:
    inventory = inventory_of(args)
    audit = audit_of(args)
    origin = Origin.local_user()
    try:
        try:
            host = inventory.host(args.host)
        except ProofbotError as exc:
            await record_refusal(audit, "restart", origin, args.host, exc)
            raise
        plan = await request_restart(inventory, host, origin=origin, audit=audit)
        print(render_restart_plan(plan), file=sys.stderr if args.json else sys.stdout, flush=True)
        refusal = "" if args.yes else await confirm(f"Restart {plan.service.unit} on {host.name} now?")
        if refusal:
            await withdraw(audit, plan, origin.actor, refused=not sys.stdin.isatty(), reason=refusal)
            raise Refused(f"not restarted: {refusal}", hint="pass --yes to restart without asking")
        decided = await approvals.decide(audit, plan.operation_id, origin.actor, "approved", inventory.approvals)
        status = _StatusLine(sys.stderr) if sys.stderr.isatty() else None
        try:
            result = await apply_restart(plan, decided, origin=origin, audit=audit,
                                         on_progress=status.show if status else None)
        finally:
            if status:
                await status.close()
    finally:
        audit.close()
    code = print_result(result, as_json=args.json, verbose=args.verbose)
    if not args.json:
        ready = result.extra.get("ready_after_s")
        print(f"  PID {result.extra.get('old_pid')} → {result.extra.get('new_pid') or 'no new PID'}"
              + (f" · ready {ready:.2f} s after the restart command" if ready is not None else " · never ready"))
    return code


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


COMMAND = CliCommand("restart", add_arguments, run)
