"""One dataclass per audit event kind (commands/vocabulary.EventKind): the one shape of each kind's details.
Here the kinds every operation writes (its request, its checks, its ending); the others, which a verify never
writes, are commands/store/kinds_other.py's, loaded on first use, and named here too (``kinds.Vote``).

What views, Datasette queries, the trail, recovery and re-verify read is named here as fields; what
only one operation adds (a restart's PIDs, a restore's files) rides in ``extra``, never under a field's
name. ``details()`` leaves out a field that is None, so a reader's ``json_extract`` gives NULL for it,
as it did before these types. commands/store/log.py writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from commands.frozen import Frozen
from commands.vocabulary import CheckStatus, EventKind, Verdict

if TYPE_CHECKING:
    from commands.findings import Finding
    from commands.operation import OperationResult, Origin
    from commands.store.kinds_other import (
        Approved,
        BotStarted,
        BotStopped,
        Cancelled,
        Expired,
        Interrupted,
        LockReleasedStale,
        PlanShown,
        Refusal,
        Rejected,
        SlackLeftOut,
        Step,
        Viewed,
        Vote,
        WatchChange,
        WatchRun,
    )

# Every kind is named here; those of kinds_other.py load on first use (``from commands.store.kinds import Vote``).
__all__ = [
    "Approved",
    "BotStarted",
    "BotStopped",
    "Cancelled",
    "Check",
    "EventBody",
    "Expired",
    "Finished",
    "Interrupted",
    "LockReleasedStale",
    "PlanShown",
    "Refusal",
    "Rejected",
    "Requested",
    "SlackLeftOut",
    "Step",
    "Viewed",
    "Vote",
    "WatchChange",
    "WatchRun",
]


def __getattr__(name: str) -> Any:
    """A kind a verify never writes, from kinds_other.py (its 16 classes cost a cold CLI ~8 ms of CPU to make)."""
    if name in __all__:
        from commands.store import kinds_other

        return getattr(kinds_other, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True, eq=False, repr=False)
class EventBody(Frozen):
    """What every kind shares: its kind, and details made of its fields (None left out) and its extra."""

    KIND: ClassVar[EventKind]

    def details(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        shape = {name: value for name, value in own.items() if value is not None}
        extra: Mapping[str, Any] = getattr(self, "extra", {})
        clash = sorted(set(extra) & set(own))
        if clash:  # a field's key means one thing in every operation's events
            raise ValueError(f"{self.KIND} extra names a field of its own: {', '.join(clash)}")
        return {**shape, **extra}


@dataclass(frozen=True, eq=False, repr=False)
class Requested(EventBody):
    """An operation asked for: by whom and where (``origin``, with its process, so recovery can tell
    a live run from a dead one), and what (the operation's own facts in ``extra``)."""

    KIND = EventKind.REQUESTED
    origin: Mapping[str, Any]
    checks: list[str] | None = None
    plan_hash: str | None = None
    fleet: Mapping[str, Any] | None = None  # a fleet operation: target, hosts, limits
    fleet_operation_id: str | None = None  # one host's part of that fleet operation
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, origin: Origin, **facts: Any) -> Requested:
        named = {name: facts.pop(name) for name in ("checks", "plan_hash", "fleet", "fleet_operation_id")
                 if name in facts}
        return cls(origin.to_json(), **named, extra=facts)


@dataclass(frozen=True, eq=False, repr=False)
class Check(EventBody):
    """One finding of a check (its own facts flattened in: ``$.live_sha256``)."""

    KIND = EventKind.CHECK
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, finding: Finding) -> Check:
        return cls(finding.to_event())


@dataclass(frozen=True, eq=False, repr=False)
class Finished(EventBody):
    """How an operation ended: always a ``Verdict``, plus what else is known where it is known (a summary;
    a host's duration and statuses; a fleet's counts and hosts; where an interrupted one stood)."""

    KIND = EventKind.FINISHED
    verdict: Verdict | str  # made a Verdict on construction: a word that is not one is refused (ValueError)
    summary: str | None = None
    duration_s: float | None = None
    statuses: Mapping[str, CheckStatus] | None = None  # each check's status, by name
    counts: Mapping[str, int] | None = None  # a fleet's hosts by outcome
    hosts: Mapping[str, str] | None = None  # a fleet's hosts' operation ids
    last_event: Mapping[str, Any] | None = None  # an interrupted operation: where it stood
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    @classmethod
    def of(cls, result: OperationResult, **extra: Any) -> Finished:
        """A host's operation that ran its checks: the verdict, duration and each check's status."""
        return cls(result.verdict, duration_s=round(result.duration_s, 3),
                   statuses={f.name: CheckStatus(f.status) for f in result.checks}, extra=extra)


