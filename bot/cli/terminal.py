"""What every CLI command shares: exit codes, printing a result, the inventory and audit DB from flags, asking.

Exit codes (README "Using it"): 0 pass, 1 a check failed, 2 bad usage, 3 could not check,
4 refused. The last two of those come from ``commands.errors``; the first three from the verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from bot.plain_text import render_result
from commands.errors import ProofbotError
from commands.inventory import Inventory, inventory_path, load_inventory
from commands.operation import OperationResult, Origin
from commands.store.events import AuditStore, db_path

EXIT_FOR_VERDICT = {"pass": 0, "fail": 1, "error": 3}


def inventory_of(args: argparse.Namespace) -> Inventory:
    return load_inventory(inventory_path(getattr(args, "inventory", None)))


def audit_of(args: argparse.Namespace) -> AuditStore:
    return AuditStore.open(db_path(getattr(args, "db", None)))


async def record_refusal(audit: AuditStore, operation: str, origin: Origin, host: str, exc: ProofbotError) -> None:
    """A request refused before it became an operation (unknown host, bad backup…) is still audited."""
    await audit.append("refused", operation=operation, actor=origin.actor,
                       details={"reason": str(exc), "requested_host": host, "origin": origin.to_json()})


def print_result(result: OperationResult, *, as_json: bool, verbose: bool) -> int:
    """Print the result as README shows it (or as one JSON object) and return its exit code."""
    if as_json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        print(render_result(result, verbose=verbose))
    return EXIT_FOR_VERDICT[result.verdict]


async def confirm(question: str) -> str:
    """'' when the person at the terminal said yes, else why not (no terminal, or not yes)."""
    if not sys.stdin.isatty():
        return "no terminal to ask for confirmation on"
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = await asyncio.to_thread(sys.stdin.readline)
    except (EOFError, KeyboardInterrupt):
        answer = ""
    return "" if answer.strip().lower() in ("y", "yes") else "not confirmed at the prompt"
