"""What a CLI subcommand is: its arguments and the coroutine that runs it (one per registry operation)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CliCommand:
    name: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Awaitable[int]]
    epilog: str = ""
