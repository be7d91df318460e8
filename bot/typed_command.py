"""A proofbot command line as its user can type it back: the program as their shell finds it, and
the ``--inventory``/``--db`` they gave, so every hint proofbot prints runs exactly as printed."""

from __future__ import annotations

import os
import shlex
import shutil
from contextvars import ContextVar

# Set once by the ``proofbot`` script (bot.cli.main); run any other way (``python -m bot.cli``, the
# tests' in-process renderers) hints read ``proofbot`` with no options, as they always did.
PROGRAM: ContextVar[str] = ContextVar("PROGRAM", default="proofbot")
GIVEN: ContextVar[tuple[str, ...]] = ContextVar("GIVEN", default=())


def typed_program(script: str) -> str:
    """``proofbot`` when the shell's PATH finds this very script under that name (pipx, the image, an
    activated venv); else its absolute path: `scripts/demo` runs ``.venv/bin/proofbot``, which no PATH has."""
    if os.path.basename(script) != "proofbot" or not os.path.isfile(script):
        return "proofbot"  # `python -m bot.cli`: no script of ours to name
    found = shutil.which("proofbot")
    if found is not None and os.path.samefile(found, script):
        return "proofbot"
    return os.path.abspath(script)


def given_options(inventory: str | None, db: str | None) -> tuple[str, ...]:
    """The options a hint must repeat, as the user gave them (a relative path stays relative to where they are)."""
    return (*(("--inventory", inventory) if inventory else ()), *(("--db", db) if db else ()))


def command_line(*words: str, given: tuple[str, ...] | None = None) -> str:
    """``proofbot restore ct129 --undo DIR --inventory inv.yml``: quoted for a POSIX shell."""
    return shlex.join([PROGRAM.get(), *words, *(GIVEN.get() if given is None else given)])
