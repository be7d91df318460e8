"""The audit trail: the last operations, newest first, read back from the events log.

An operation is what a ``requested`` event opened (its ``operation_id`` ties the rest
together). Who approved comes from an ``approved`` event of the same operation (its actor
is the approver); ``rejected`` and ``expired`` are decisions too. The verdict is the one
the ``finished`` event carries, else the event that ended the operation without one
(rejected, expired, refused, interrupted), else the operation is still in progress.

A fleet operation (``verify GROUP``: ``host`` NULL, ``details.fleet``) is one record with its
target, its number of hosts and its counts; the verify of each of its hosts names it
(``details.fleet_operation_id``) and is listed only under that host, with a note of the fleet.

Reading is two indexed queries: the last N ``requested`` events (their ids from the
covering index ``events_kind_host`` for one host, from the partial index
``events_listed_requests`` across hosts, which leaves a fleet's parts out), then the few
events that decide those N operations (index ``events_operation_kind``); a third names the
fleets a host's operations were part of. bench/audit_bench.py times it at 100,000 events.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from commands.operation import Origin
from commands.store import DEFAULT_LIMIT, IN_PROGRESS, MAX_LIMIT
from commands.store.db import AuditStore
from commands.store.events import sql_list
from commands.store.log import audit_log
from commands.store.schema import require_text
from commands.vocabulary import ENDING_KINDS, EventKind, Operation, Verdict

if TYPE_CHECKING:
    from commands.store.handle import Db

DECISIONS = (EventKind.APPROVED, EventKind.REJECTED, EventKind.EXPIRED)
# What ends an operation without a verdict of its own: the first of these is its verdict.
ENDED_WITHOUT_VERDICT = (DECISIONS[1:] + tuple(sorted(ENDING_KINDS - {EventKind.FINISHED})))
# The request of a host's part of a fleet operation names the fleet; the partial index
# events_listed_requests (migration 6) holds exactly the requests without this.
NOT_A_PART = "json_extract(details, '$.fleet_operation_id') IS NULL"


@dataclass(frozen=True)
class FleetRecord:
    """A fleet operation as the log tells it: what was asked, over how many hosts, how they came out."""

    operation_id: str
    target: str
    hosts: int
    counts: dict[str, int]  # pass, warn, fail, error → hosts; empty until it finished

    def to_json(self) -> dict[str, Any]:
        return {"operation_id": self.operation_id, "target": self.target, "hosts": self.hosts,
                "counts": dict(self.counts)}


@dataclass(frozen=True)
class OperationRecord:
    """One operation as the log tells it."""

    operation_id: str
    operation: str | None
    host: str | None
    requested_at: str
    requested_by: str | None
    via: str | None
    channel: str | None
    thread_ts: str | None
    decision: str | None  # approved | rejected | expired, for operations that needed one
    decided_by: str | None
    verdict: str  # pass | fail | error, or rejected | expired | refused | interrupted | "in progress"
    finished_at: str | None
    fleet: FleetRecord | None = None  # this operation is a fleet's (``verify GROUP``)
    part_of: FleetRecord | None = None  # this host's operation was part of that fleet operation
    note: str | None = None  # an interrupted one: its ``finished`` summary (who stopped; a restart never sent)

    @property
    def approved_by(self) -> str | None:
        return self.decided_by if self.decision == EventKind.APPROVED else None

    def to_json(self) -> dict[str, Any]:
        return {"operation_id": self.operation_id, "operation": self.operation, "host": self.host,
                "requested_at": self.requested_at, "requested_by": self.requested_by,
                "approved_by": self.approved_by, "verdict": self.verdict, "channel": self.channel,
                "thread_ts": self.thread_ts, "finished_at": self.finished_at,
                "fleet": self.fleet.to_json() if self.fleet else None,
                "part_of": self.part_of.to_json() if self.part_of else None, "note": self.note}


async def recent_operations(store: AuditStore, host: str | None = None,
                            limit: int = DEFAULT_LIMIT) -> list[OperationRecord]:
    """The last ``limit`` operations, newest first, on ``host`` or across hosts."""
    return await store.snapshot(lambda db: query_operations(db, host, limit))


def query_operations(db: Db, host: str | None, limit: int) -> list[OperationRecord]:
    limit = max(1, min(limit, MAX_LIMIT))
    # The ids come from the covering index alone; only the N rows chosen are read from the table.
    if host is None:  # a fleet's parts are left out: the fleet is their one line
        newest = (f"SELECT id FROM events INDEXED BY events_listed_requests WHERE kind = '{EventKind.REQUESTED}' "
                  f"AND {NOT_A_PART} ORDER BY id DESC LIMIT ?")
        arguments: list[Any] = [limit]
    else:
        newest = f"SELECT id FROM events WHERE kind = '{EventKind.REQUESTED}' AND host = ? ORDER BY id DESC LIMIT ?"
        arguments = [host, limit]
    return _records(db, newest, arguments)


async def last_per_host(store: AuditStore) -> dict[str, OperationRecord]:
    """Each host's last operation (verify, restore or restart, whatever became of it), for the App Home.
    One ``requested`` id per host from the covering index, then the same two queries as the trail."""
    newest = f"SELECT max(id) FROM events WHERE kind = '{EventKind.REQUESTED}' AND host IS NOT NULL GROUP BY host"
    records = await store.snapshot(lambda db: _records(db, newest, []))
    return {record.host: record for record in records if record.host}


def _records(db: Db, newest: str, arguments: list[Any]) -> list[OperationRecord]:
    """The operations whose ``requested`` event ids ``newest`` selects, newest first, with their outcomes."""
    requested = list(db.query(
        f"SELECT id, operation_id, operation, host, at, actor, details FROM events WHERE id IN ({newest}) "
        "AND operation_id IS NOT NULL ORDER BY id DESC", arguments))
    for row in requested:  # a hand-edited BLOB is an error naming its row, never a crash or b'…' shown
        require_text(row, row["id"], ("operation_id", "operation", "host", "at", "actor", "details"),
                     nullable=("operation", "host", "actor"))
    outcomes: dict[str, list[dict[str, Any]]] = {str(row["operation_id"]): [] for row in requested}
    if outcomes:
        kinds = (EventKind.FINISHED, *DECISIONS, *ENDED_WITHOUT_VERDICT)
        marks = ", ".join("?" for _ in outcomes)
        for row in db.query(f"SELECT id, operation_id, kind, actor, at, details FROM events "
                            f"WHERE operation_id IN ({marks}) AND kind IN ({', '.join('?' for _ in kinds)}) "
                            f"ORDER BY id", [*outcomes, *kinds]):
            require_text(row, row["id"], ("kind", "actor", "at", "details"), nullable=("actor",))
            outcomes[row["operation_id"]].append(row)
    asked = {str(row["operation_id"]): _json(row["details"]) for row in requested}  # each parsed once
    fleets = _fleets_of(db, {details.get("fleet_operation_id") for details in asked.values()})
    return [_record(row, asked[str(row["operation_id"])], outcomes[str(row["operation_id"])], fleets)
            for row in requested]


def _fleets_of(db: Db, ids: set[Any]) -> dict[str, FleetRecord]:
    """The fleet operations these hosts' operations were part of, by id."""
    wanted = sorted(str(i) for i in ids if i)
    if not wanted:
        return {}
    marks = ", ".join("?" for _ in wanted)
    fleets: dict[str, FleetRecord] = {}
    for row in db.query(f"SELECT operation_id, kind, details FROM events WHERE operation_id IN ({marks}) "
                        f"AND kind IN {sql_list((EventKind.REQUESTED, EventKind.FINISHED))} ORDER BY id", wanted):
        operation_id, details = str(row["operation_id"]), _json(row["details"])
        if row["kind"] == EventKind.REQUESTED:
            fleet = _fleet_record(operation_id, details)
            if fleet is not None:
                fleets[operation_id] = fleet
        elif operation_id in fleets:
            fleets[operation_id] = replace(fleets[operation_id], counts=_counts(details))
    return fleets


def _fleet_record(operation_id: str, requested: dict[str, Any], finished: dict[str, Any] | None = None
                  ) -> FleetRecord | None:
    """A fleet from its ``requested`` details (target, hosts) and ``finished`` ones (counts); None if no fleet."""
    fleet = requested.get("fleet")
    if not isinstance(fleet, dict):
        return None
    hosts = fleet.get("hosts")
    return FleetRecord(operation_id, str(fleet.get("target") or "?"), len(hosts) if isinstance(hosts, list) else 0,
                       _counts(finished or {}))


def _counts(finished: dict[str, Any]) -> dict[str, int]:
    counts = finished.get("counts")
    return {str(k): v for k, v in counts.items() if isinstance(v, int)} if isinstance(counts, dict) else {}


def _record(requested: dict[str, Any], details: dict[str, Any], outcomes: list[dict[str, Any]],
            fleets: dict[str, FleetRecord]) -> OperationRecord:
    origin = details.get("origin") or {}
    decision = decided_by = finished_at = None
    finished: dict[str, Any] | None = None
    verdict = IN_PROGRESS
    for outcome in outcomes:
        kind = outcome["kind"]
        if kind in DECISIONS and decision is None:  # the first decision is the one that counted
            decision, decided_by = kind, outcome["actor"]
        if kind == EventKind.FINISHED:
            finished = _json(outcome["details"])
            verdict, finished_at = str(finished.get("verdict") or "unknown"), outcome["at"]
        elif kind in ENDED_WITHOUT_VERDICT and verdict == IN_PROGRESS:
            verdict, finished_at = kind, outcome["at"]
    operation_id = str(requested["operation_id"])
    return OperationRecord(operation_id, requested["operation"], requested["host"],
                           requested["at"], requested["actor"], _str(origin.get("via")), _str(origin.get("channel")),
                           _str(origin.get("thread_ts")), decision, decided_by, verdict, finished_at,
                           fleet=_fleet_record(operation_id, details, finished),
                           part_of=fleets.get(str(details.get("fleet_operation_id"))),
                           note=_str(finished.get("summary")) if finished and verdict == Verdict.INTERRUPTED else None)


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


async def record_view(store: AuditStore, *, host: str | None, limit: int, origin: Origin,
                      listed: Sequence[OperationRecord]) -> None:
    """Reading the trail is itself recorded (kind ``viewed``): who looked, where, at what."""
    await audit_log(store, Operation.AUDIT, host=host, actor=origin.actor).viewed(
        limit, origin, [record.operation_id for record in listed])


async def last_finished_id(store: AuditStore) -> int:
    """The id of the newest ``finished`` event (0: none yet): it moves when any operation ends, whoever
    ran it (Slack or the CLI on the same database); one lookup in the ``events(kind, at)`` index."""
    row = await store.snapshot(lambda db: next(iter(db.query(
        f"SELECT max(id) AS id FROM events WHERE kind = '{EventKind.FINISHED}'")), {}))
    return int(row.get("id") or 0)
