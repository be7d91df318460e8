"""The one small exception tree of proofbot.

Exceptions mean "could not do or check it"; a check that ran and found a problem is a
finding, never an exception. Each class carries the exit code the CLI maps it to
(README "Using it"). SSH failures are mapped into this tree once, in ``commands.ssh.failures``.

    ProofbotError                 exit 3 unless a subclass says otherwise
    ├── UsageError                exit 2: bad arguments or inventory
    │   ├── InventoryError
    │   ├── UnknownHost
    │   └── UnknownBackup
    ├── Refused                   exit 4: nothing was done, on purpose
    │   ├── Locked                another mutating operation holds the host
    │   └── PlanVoid              the host or inventory changed since the plan was shown
    └── CouldNotCheck             exit 3: no evidence could be had
        ├── HostUnreachable
        │   └── BastionUnreachable   a jump host failed: every host behind it
        ├── HostKeyNotVerified
        ├── AuthenticationFailed
        ├── CommandTimedOut
        ├── ConnectionLost
        └── MissingOutput
    CouldNotRecord                exit 3: the audit database did not take a write (down, restarting, unreachable)
"""

from __future__ import annotations


class ProofbotError(Exception):
    """Base of every error proofbot raises on purpose."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(ProofbotError):
    """Bad usage: unknown host or backup, bad inventory, bad arguments (exit 2)."""

    exit_code = 2


class InventoryError(UsageError):
    """The inventory file is missing, unreadable or invalid; ``problems`` lists every problem found
    (``file``, ``line``, ``key``, ``message``), the message says each on a line of its own."""

    def __init__(self, message: str, *, hint: str = "", problems: list[dict[str, object]] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems = problems or []


class UnknownHost(UsageError):
    """HOST is not in the inventory."""


class UnknownBackup(UsageError):
    """BACKUP is not listed for the host, or the choice is ambiguous."""


class Refused(ProofbotError):
    """Refused on purpose: not approved, locked, expired, wrong channel (exit 4)."""

    exit_code = 4


class Locked(Refused):
    """Another mutating operation holds the host; ``holder`` says which and where."""

    def __init__(self, message: str, *, hint: str = "", holder: dict[str, object] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder or {}


class PlanVoid(Refused):
    """The host or the inventory changed after the plan was shown: nothing was changed."""


class CouldNotCheck(ProofbotError):
    """The host could not be asked, so there is no evidence (exit 3)."""

    exit_code = 3


class HostUnreachable(CouldNotCheck):
    """TCP connect or SSH handshake failed or timed out."""


class HostKeyNotVerified(CouldNotCheck):
    """The host's key is unknown or does not match known_hosts: never auto-accepted."""


class AuthenticationFailed(CouldNotCheck):
    """The host refused our client key."""


class CommandTimedOut(CouldNotCheck):
    """A remote command did not finish within command_timeout_s."""


class ConnectionLost(CouldNotCheck):
    """The link dropped mid-command: no exit status came back."""


class MissingOutput(CouldNotCheck):
    """A command that must print something printed nothing."""


class BastionUnreachable(HostUnreachable):
    """A jump host (``ssh.jump``) could not be reached or logged into: no host behind it was asked."""


class CouldNotRecord(ProofbotError):
    """The audit database could not be reached or did not take a write: what was not recorded is not claimed.
    Not a CouldNotCheck: an operation that handles a lost SSH link must not take this for one (exit 3 all the
    same)."""
