"""What a CLI subcommand is: the coroutine that runs it (one per registry operation; its arguments are in
``bot.cli.arguments``)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from commands.frozen import Frozen


@dataclass(frozen=True, eq=False, repr=False)
class CliCommand(Frozen):
    name: str
    run: Callable[[argparse.Namespace], Awaitable[int]]
