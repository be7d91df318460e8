"""An audit event as stored: the row, its hash over its content and its predecessor's, and the one
primitive that appends it after the chain head.

Nothing outside the store appends with the primitive: every event is written by its kind's writer
(commands/store/log.py), which gives each kind one shape. See README "Audit trail".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from commands import observe
from commands.clock import utc_now
from commands.frozen import Frozen
from commands.redact import redact_data

if TYPE_CHECKING:
    from commands.store.handle import Db

GENESIS_HASH = "0" * 64
D = TypeVar("D")


@dataclass(frozen=True, eq=False, repr=False)
class Event(Frozen):
    id: int
    at: str
    operation_id: str | None
    operation: str | None
    host: str | None
    kind: str
    actor: str | None
    details: dict[str, Any]
    prev_hash: str
    hash: str


def event_hash(fields: dict[str, Any]) -> str:
    """sha-256 of an event's content and its predecessor's hash, in canonical JSON."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def from_row(cls: type[D], row: Mapping[str, Any], **decoded: Any) -> D:
    """The dataclass ``cls`` built from a dict row by column name; ``decoded`` replaces raw columns
    (JSON text, say). Columns the dataclass does not name are left out, so a later migration may add some."""
    names = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: decoded[name] if name in decoded else row[name] for name in names})


def first_row(db: Db, sql: str, *params: Any) -> dict[str, Any] | None:
    """The first row of a query as a dict, or None."""
    return next(db.query(sql, params), None)


def append_event(db: Db, kind: str, *, operation_id: str | None = None,
                 operation: str | None = None, host: str | None = None, actor: str | None = None,
                 details: dict[str, Any] | None = None) -> Event:
    """Append one event after the current head, inside the caller's IMMEDIATE transaction (``store.write``),
    which keeps the head still; a change to another table can so be logged atomically with it.
    The store's private primitive: callers write through commands/store/log.py."""
    # The last gate: nothing reaches the log unmasked. Details a writer already made plain (its snapshot, taken
    # on the event loop) are not converted a second time.
    payload = redact_data(details if isinstance(details, Plain) else plain(details))
    head = first_row(db, "SELECT id, hash FROM events ORDER BY id DESC LIMIT 1")
    fields: dict[str, Any] = {"at": utc_now(), "operation_id": operation_id, "operation": operation, "host": host,
                              "kind": kind, "actor": actor, "details": payload,
                              "prev_hash": head["hash"] if head else GENESIS_HASH}
    digest = event_hash(fields)
    # The id SQLite would pick (the last + 1), given on both backends: a PostgreSQL sequence would leave a
    # gap at each rolled-back append, which the chain check would read as a deleted event.
    event_id = int(head["id"]) + 1 if head else 1
    row = {"id": event_id, **fields, "details": stored_details(payload), "hash": digest}
    # A plain INSERT, not sqlite-utils' table().insert(): that one rebuilds its query per row (~0.3 ms of CPU
    # per event, a tenth of a cold verify's own CPU); `?` works on both backends (pg.py translates it).
    db.execute(_INSERT_EVENT, [row[column] for column in _EVENT_COLUMNS])
    event = Event(id=event_id, hash=digest, **fields)
    observe.appended(event)  # serve's metrics (commands/observe.py)
    return event


_EVENT_COLUMNS = ("id", "at", "operation_id", "operation", "host", "kind", "actor", "details", "prev_hash", "hash")
_INSERT_EVENT = f"INSERT INTO events ({', '.join(_EVENT_COLUMNS)}) VALUES ({', '.join('?' * len(_EVENT_COLUMNS))})"


def stored_details(details: Any) -> str:
    """The exact text an event's details are stored as (the chain check demands exactly this)."""
    return json.dumps(details, sort_keys=True, ensure_ascii=False)


class Plain(dict[str, Any]):
    """Details ``plain`` made: JSON's types only, a copy no caller holds (``append_event`` takes them as they are)."""


def plain(details: Mapping[str, Any] | None) -> Plain:
    """Details as JSON will store them (paths, dates and the like become strings; enums their values)."""
    return Plain(json.loads(json.dumps(dict(details or {}), default=str)))


def sql_list(values: Iterable[str]) -> str:
    """An SQL ``IN`` list of vocabulary values (commands/vocabulary.py), in a stable order: ``('a', 'b')``."""
    return "(" + ", ".join(f"'{value}'" for value in sorted(values)) + ")"


def event_of(row: Mapping[str, Any]) -> Event:
    return from_row(Event, row, details=json.loads(row["details"]))
