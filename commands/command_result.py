"""One remote command's outcome: a leaf with no asyncssh import, so every pure parser can take it."""

from __future__ import annotations

from dataclasses import dataclass

from commands.frozen import Frozen


@dataclass(frozen=True, eq=False, repr=False)
class CommandResult(Frozen):
    """One remote command: what ran, its exit status and its combined output."""

    command: str
    exit_status: int
    output: bytes
    duration_s: float

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", errors="replace")
