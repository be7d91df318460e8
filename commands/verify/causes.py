"""Why a verify could not check: the cause as data (``details["cause"]``, and for a refused host key the
decision's kind), so the next step is chosen on types, never on the words of a message."""

from __future__ import annotations

from enum import StrEnum

from commands.errors import BastionUnreachable, CouldNotCheck
from commands.ssh.failures import HostKeyRefused

CAUSE, KEY_REFUSAL = "cause", "key_refusal"  # the keys of a could-not-check finding's details


class Cause(StrEnum):
    """Why nothing was checked."""

    CONNECTION = "connection"  # the host could not be asked (unreachable, key, login, link, output)
    BASTION = "bastion"  # a jump host on the way could not be reached or logged into
    DEADLINE = "deadline"  # the fleet's per-host deadline ended the verify
    FLEET_DEADLINE = "fleet-deadline"  # the fleet's own deadline came before this host's turn: never started


# Refusals of a key that the host presented and that must never be answered with advice to trust it:
# revoked, a certificate that is wrong, or a key other than the one known (commands.known_hosts.Decision.kind).
REFUSED_KEY_KINDS = frozenset({"revoked", "revoked-ca", "principal", "expired", "not-yet-valid", "untrusted-ca",
                               "bad-certificate", "changed"})


def cause_of(exc: CouldNotCheck) -> tuple[str, dict[str, str]]:
    """What a could-not-check says, and its cause as data."""
    details: dict[str, str] = {CAUSE: Cause.BASTION if isinstance(exc, BastionUnreachable) else Cause.CONNECTION}
    kind = _key_refusal(exc)
    if kind is not None:
        details[KEY_REFUSAL] = kind
    return f"could not check: {exc}", dict(details)


def timed_out(deadline_s: float) -> tuple[str, dict[str, str]]:
    return f"timed out after {deadline_s:g} s (fleet.host_deadline_s)", {CAUSE: Cause.DEADLINE}


def _key_refusal(exc: BaseException) -> str | None:
    """The kind of proofbot's refusal of a host key anywhere in the chain of causes (a bastion's too)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, HostKeyRefused):
            return seen.decision.kind
        seen = seen.__cause__
    return None
