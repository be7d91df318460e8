"""What a CLI subcommand is: the coroutine that runs it (one per registry operation; its arguments are in
``bot.cli.arguments``)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CliCommand:
    name: str
    run: Callable[[argparse.Namespace], Awaitable[int]]
