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
from typing import TYPE_CHECKING, TextIO

from bot.cli.command import CliCommand
from bot.cli.terminal import (
    add_host_and_output_arguments,
    approve_at_terminal,
    print_result,
    session,
)
from bot.plain_text import progress_line, render_restart_plan
from commands.errors import ProofbotError

if TYPE_CHECKING:
    from commands.restart import RestartProgress

TICK_S = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_and_output_arguments(parser)
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")


async def run(args: argparse.Namespace) -> int:
    from commands.restart import apply_restart, request_restart  # loaded here: verify never needs it

    async with session(args) as cli:
        try:
            host = cli.inventory.host(args.host)
        except ProofbotError as exc:
            await cli.refused("restart", args.host, exc)
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
