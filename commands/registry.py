"""The one list of operations: it drives the CLI subcommands, the Slack commands and manifest.yml's slash commands
(written from it by scripts/manifest.py)."""

from __future__ import annotations

from typing import NamedTuple

from commands.vocabulary import Operation


class OperationSpec(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    name: Operation
    usage: str
    summary: str
    mutating: bool


OPERATIONS: tuple[OperationSpec, ...] = (
    OperationSpec(
        name=Operation.VERIFY,
        usage="HOST|GROUP... [BACKUP]",
        summary="Prove a host's state: files vs backup, main PID, health, flags, stale process",
        mutating=False,
    ),
    OperationSpec(
        name=Operation.RESTORE,
        usage="HOST [BACKUP]",
        summary="Put a backup's files back after approval: snapshot, atomic replace, re-read as proof",
        mutating=True,
    ),
    OperationSpec(
        name=Operation.RESTART,
        usage="HOST | GROUP",
        summary="Restart a service after approval and prove it: new PID, health 200, right flags, a real request",
        mutating=True,
    ),
    OperationSpec(
        name=Operation.AUDIT,
        usage="[HOST] [N]",
        summary="Show the last N operations (default 10), newest first: who asked, who approved, verdict, thread",
        mutating=False,
    ),
    OperationSpec(
        name=Operation.POLICY,
        usage="[HOST|GROUP]",
        summary="Who may do what, where: each policy's approvers (user groups with their members), N of them, channels",
        mutating=False,
    ),
)
