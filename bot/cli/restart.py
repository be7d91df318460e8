"""``proofbot restart HOST [--yes] [--json]``: show the plan, ask, restart, prove it took effect.

Without ``--yes`` the plan is confirmed on the terminal; with no terminal to ask on
nothing changes and the exit code is 4 (SPEC.md). While it waits, a live status line on
stderr (when it is a terminal) shows the elapsed time and each signal's state.
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
from typing import TextIO

from bot.plain_text import plan_text, progress_line, render_result
from commands.errors import ProofbotError, Refused
from commands.inventory import Inventory
from commands.operation import OperationResult, Origin
from commands.restart.run import RestartProgress, plan_restart, restart
from commands.restart.verdict import check_names
from commands.store.events import AuditStore, db_path

COMMAND = "restart"
SUMMARY = "Restart a host's service, then prove it: new PID, health 200, right flags, a real request"
EXIT_FOR_VERDICT = {"pass": 0, "fail": 1, "error": 3}
TICK_S = 0.2


def add_restart_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                       shared: argparse.ArgumentParser) -> None:
    command = sub.add_parser(COMMAND, parents=[shared], help=SUMMARY, description=SUMMARY)
    command.add_argument("host", metavar="HOST")
    command.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.add_argument("-v", "--verbose", action="store_true", help="show the evidence of passing checks too")


async def run_restart(args: argparse.Namespace, inventory: Inventory) -> int:
    audit = AuditStore.open(db_path(getattr(args, "db", None)))
    origin = Origin.local_user()
    try:
        try:
            host = inventory.host(args.host)
            plan = await plan_restart(host)
        except ProofbotError as exc:
            await audit.append("refused", operation=COMMAND, actor=origin.actor,
                               details={"reason": str(exc), "requested_host": args.host, "origin": origin.to_json()})
            raise
        out = sys.stderr if args.json else sys.stdout
        print(plan_text(plan), file=out, flush=True)
        await audit.append("requested", operation_id=plan.operation_id, operation=COMMAND, host=host.name,
                           actor=origin.actor, details={"plan_hash": plan.plan_hash, "checks": check_names(plan),
                                                        "origin": origin.to_json(),
                                                        "confirmed_by": "--yes" if args.yes else "terminal"})
        await audit.append("plan-shown", operation_id=plan.operation_id, operation=COMMAND, host=host.name,
                           actor=origin.actor, details=plan.to_json())
        if not args.yes:
            refusal = await _confirm(host.name, plan.service.unit)
            if refusal:
                kind = "refused" if refusal.startswith("no terminal") else "cancelled"
                await audit.append(kind, operation_id=plan.operation_id, operation=COMMAND, host=host.name,
                                   actor=origin.actor, details={"reason": refusal, "plan_hash": plan.plan_hash})
                raise Refused(f"not restarted: {refusal}", hint="pass --yes to restart without asking")
        status = _StatusLine(sys.stderr) if sys.stderr.isatty() else None
        try:
            result = await restart(plan, origin=origin, audit=audit, request_recorded=True,
                                   on_progress=status.show if status else None)
        finally:
            if status:
                await status.close()
    finally:
        audit.close()
    _print(result, as_json=args.json, verbose=args.verbose)
    return EXIT_FOR_VERDICT[result.verdict]


async def _confirm(host: str, unit: str) -> str:
    """'' when the person at the terminal said yes, else why not."""
    if not sys.stdin.isatty():
        return "no terminal to ask for confirmation on"
    print(f"Restart {unit} on {host} now? [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = await asyncio.to_thread(sys.stdin.readline)
    except (EOFError, KeyboardInterrupt):
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return ""
    return "the restart was not confirmed"


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
            progress = _with_elapsed(progress, progress.elapsed_s + (time.monotonic() - self._at))
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


def _with_elapsed(progress: RestartProgress, elapsed: float) -> RestartProgress:
    return replace(progress, elapsed_s=round(elapsed, 1))


def _print(result: OperationResult, *, as_json: bool, verbose: bool) -> None:
    if as_json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    print(render_result(result, verbose=verbose))
    extra = result.extra
    ready = extra.get("ready_after_s")
    print(f"  PID {extra.get('old_pid')} → {extra.get('new_pid') or 'no new PID'}"
          + (f" · ready {ready:.2f} s after the restart command" if ready is not None else " · never ready"))

