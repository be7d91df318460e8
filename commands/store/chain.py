"""Checks the audit log's hash chain: walks every event and reports the first broken link.

Each event stores ``prev_hash`` (its predecessor's hash, the genesis hash for the first)
and ``hash`` (sha-256 of its canonical content, see ``event_hash``). Walking the events in
id order, a link breaks when a row's content no longer hashes to its ``hash`` (edited),
when it does not name the row before it (a row was deleted or inserted), or when the
first row does not start from the genesis hash.

Deleting the *last* rows leaves a shorter chain that is still internally consistent, so
the walk ends by comparing the tail with ``chain_head``: a one-row table that a trigger
moves forward in the same transaction as every append (migration 3), counting appends.
A tail that stops short of the head, or a count below the head's, is a truncation.

What this cannot catch on its own: anyone who can write the file can also rewrite the
chain from some row onward AND the head (after dropping their triggers): the hashes are
not keyed. Against that, keep the head somewhere else: ``proofbot audit verify`` prints
it, and ``--anchor ID:HASH`` checks that a head noted earlier is still in the chain.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from commands.errors import UsageError
from commands.store.db import AuditStore
from commands.store.events import GENESIS_HASH, event_hash, first_row, stored_details
from commands.store.handle import Streaming
from commands.store.migrations import MIGRATIONS, statements
from commands.store.pg_schema import pg_expected, pg_guard_sql, pg_has_table, pg_present
from commands.store.schema import (
    MASTER,
    SchemaDifference,
    normalised,
    schema_differences,
    schema_from,
    wrong_types,
)

if TYPE_CHECKING:
    from commands.store.handle import Db

Problem = Literal["edited", "deleted", "inserted", "genesis", "truncated", "anchor"]
GUARD_TRIGGERS = (
    "events_are_append_only_update",
    "events_are_append_only_delete",
    "events_move_chain_head",
    "chain_head_follows_appends",
    "chain_head_is_kept",
)
# What an event hash covers: every column but id (the position) and hash itself.
HASHED = ("at", "operation_id", "operation", "host", "kind", "actor", "details", "prev_hash")
NULLABLE = ("operation_id", "operation", "host", "actor")


@dataclass(frozen=True)
class Row:
    id: int
    fields: dict[str, Any]
    prev_hash: str
    hash: str
    stored_as_written: bool  # the details text is exactly what an append writes for its content
    wrong_types: tuple[str, ...] = ()  # columns holding what no append writes (`actor is a BLOB, not text`)

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Row:
        fields = {name: row[name] for name in HASHED}
        wrong = tuple(wrong_types(row, (*HASHED, "hash"), nullable=NULLABLE))
        if wrong:  # never hashed: a BLOB has no JSON form, and its row was not written by an append
            return cls(int(row["id"]), fields, str(row["prev_hash"]), str(row["hash"]), False, wrong)
        as_written = False
        try:
            fields["details"] = json.loads(row["details"])
            # The hash covers parsed JSON, so it must be the only reading of the stored bytes: text
            # with a duplicate key ({"verdict":"pass",…,"verdict":"fail"}) hashes like its last value
            # while SQLite's json_extract reads the first. Only the exact text an append writes counts.
            as_written = stored_details(fields["details"]) == row["details"]
        except (TypeError, ValueError):
            pass  # not JSON any more: it was edited, and will not hash right
        return cls(int(row["id"]), fields, str(row["prev_hash"]), str(row["hash"]), as_written)

    def content_ok(self) -> bool:
        return not self.wrong_types and self.stored_as_written and event_hash(self.fields) == self.hash


@dataclass(frozen=True)
class Break:
    """The first broken link: the event it concerns, what is wrong, and how it shows."""

    event_id: int
    problem: Problem
    detail: str


@dataclass(frozen=True)
class Anchor:
    """A head noted elsewhere earlier (``ID:HASH``): that event must still be in the chain."""

    event_id: int
    hash: str


@dataclass(frozen=True)
class ChainReport:
    events: int
    head_id: int | None
    head_hash: str | None
    broken: Break | None
    missing_guards: tuple[str, ...]
    schema_differences: tuple[SchemaDifference, ...] = ()  # against what the migrations create, each naming the object

    @property
    def intact(self) -> bool:
        return self.broken is None and not self.missing_guards and not self.schema_differences


async def verify_chain(store: AuditStore, anchor: Anchor | None = None) -> ChainReport:
    """Walk the whole chain in one read snapshot (appends may continue meanwhile)."""
    return await store.snapshot(lambda db: walk_chain(db, anchor))


def walk_chain(db: Db, anchor: Anchor | None = None) -> ChainReport:
    count, previous, broken = 0, None, None
    every = "SELECT * FROM events ORDER BY id"  # streamed: a log of millions of events is never held at once
    for prev, row, following in _windows(db.iterate(every) if isinstance(db, Streaming) else db.query(every)):
        count += 1
        previous = row
        if broken is None and not (row.prev_hash == (prev.hash if prev else GENESIS_HASH) and row.content_ok()):
            broken = _diagnose(db, prev, row, following)
    if broken is None:
        broken = _check_head(db, previous, count)
    if broken is None and anchor is not None:
        broken = _check_anchor(db, anchor)
    if _on_postgres(db):  # the same walk; only the catalog differs (commands/store/pg_schema.py)
        schema, expected = pg_present(db), pg_guard_sql()
        differences = schema_differences(schema, pg_expected())
    else:
        schema, expected = schema_from(db.query(MASTER)), guard_trigger_sql()
        differences = schema_differences(schema)
    missing = tuple(name for name in GUARD_TRIGGERS
                    if name not in schema or schema[name].type != "trigger" or schema[name].sql != expected[name])
    return ChainReport(count, previous.id if previous else None, previous.hash if previous else None, broken,
                       missing, differences)


def _on_postgres(db: Db) -> bool:
    return getattr(db, "dialect", "sqlite") == "postgresql"  # sqlite-utils' own Database (tests) names none


def guard_trigger_sql() -> dict[str, str]:
    """Each guard trigger's SQL as the migrations create it (whitespace folded): a trigger that was
    dropped and recreated doing something else is as good as missing."""
    found: dict[str, str] = {}
    for _, sql in MIGRATIONS:
        for statement in statements(sql):
            words = statement.split()
            if words[:2] == ["CREATE", "TRIGGER"] and words[2] in GUARD_TRIGGERS:
                found[words[2]] = normalised(statement)
    return found


def _windows(rows: Iterable[Mapping[str, Any]]) -> Iterator[tuple[Row | None, Row, Row | None]]:
    """(previous, current, next) for every row, streaming."""
    prev: Row | None = None
    current: Row | None = None
    for values in rows:
        row = Row.of(values)
        if current is not None:
            yield prev, current, row
            prev = current
        current = row
    if current is not None:
        yield prev, current, None


def _diagnose(db: Db, prev: Row | None, row: Row, following: Row | None) -> Break:
    expected = prev.hash if prev else GENESIS_HASH
    linked, content_ok = row.prev_hash == expected, row.content_ok()
    if following is not None and following.prev_hash == expected:
        return Break(row.id, "inserted", f"event #{row.id} is not part of the chain: the event after it names "
                                         f"{_name(prev)} as its predecessor (a row was inserted)")
    if row.wrong_types:
        return Break(row.id, "edited", f"event #{row.id}: {'; '.join(row.wrong_types)}: no append writes that "
                                       f"(content edited)")
    if prev is None:
        if row.id > 1 and not linked:
            return Break(row.id, "deleted", f"the log starts at event #{row.id}, which does not start from the "
                                            f"genesis hash: events #1..#{row.id - 1} were deleted")
        if not linked:
            return Break(row.id, "genesis", f"the first event #{row.id} does not start from the genesis hash "
                                            f"{GENESIS_HASH[:12]}…")
        return Break(row.id, "edited", f"event #{row.id}'s content does not match its hash (content edited)")
    if linked:
        return Break(row.id, "edited", f"event #{row.id}'s content does not match its hash (content edited)")
    if row.prev_hash == prev.prev_hash:
        return Break(prev.id, "inserted", f"event #{prev.id} is not part of the chain: event #{row.id} names "
                                          f"#{prev.id}'s own predecessor as its predecessor (a row was inserted)")
    found = first_row(db, "SELECT id FROM events WHERE hash = ?", row.prev_hash)
    if found is not None and int(found["id"]) < prev.id:
        first = first_row(db, "SELECT MIN(id) AS id FROM events WHERE id > ?", found["id"])
        first_id = int(first["id"]) if first else prev.id
        return Break(first_id, "inserted", f"events #{first_id}..#{prev.id} are not part of the chain: event "
                                           f"#{row.id} follows #{found['id']} (rows were inserted)")
    if row.id > prev.id + 1:
        missing = f"#{prev.id + 1}" if row.id == prev.id + 2 else f"#{prev.id + 1}..#{row.id - 1}"
        return Break(row.id, "deleted", f"event #{row.id} does not follow #{prev.id}: event {missing} "
                                        f"was deleted")
    if content_ok:
        return Break(prev.id, "edited", f"event #{row.id} was chained to a different #{prev.id}: #{prev.id} was "
                                        f"edited and its hash recomputed (or a row was deleted and ids renumbered)")
    return Break(row.id, "edited", f"event #{row.id} neither matches its hash nor follows #{prev.id} "
                                   f"(content and prev_hash edited)")


def _name(row: Row | None) -> str:
    return f"#{row.id}" if row else "the genesis hash"


def _check_head(db: Db, last: Row | None, count: int) -> Break | None:
    try:
        head = None if _on_postgres(db) and not pg_has_table(db, "chain_head") else \
            first_row(db, "SELECT event_id, hash, events FROM chain_head WHERE id = 1")
    except sqlite3.OperationalError:
        head = None
    last_id = last.id if last else 0
    if head is None:
        return Break(last_id, "truncated", "the chain_head table or its row is gone: truncation cannot be ruled out")
    if not (isinstance(head["event_id"], int) and isinstance(head["events"], int) and isinstance(head["hash"], str)):
        return Break(last_id, "truncated", "the chain_head row holds what its trigger never writes (event_id "
                                           f"{head['event_id']!r:.40}, events {head['events']!r:.40}): "
                                           "truncation cannot be ruled out")
    head_id, head_hash, head_count = int(head["event_id"]), str(head["hash"]), int(head["events"])
    if last_id < head_id:
        missing = f"#{head_id}" if last_id + 1 == head_id else f"#{last_id + 1}..#{head_id}"
        return Break(last_id + 1, "truncated", f"the log ends at event #{last_id} but the chain head records "
                                               f"#{head_id}: event {missing} was deleted (tail truncated)")
    if last_id > head_id:
        return Break(head_id + 1, "inserted", f"events after #{head_id}, the recorded chain head, were added "
                                              f"without moving the head (rows inserted at the end)")
    if last is not None and last.hash != head_hash:
        return Break(last_id, "edited", f"event #{last_id} is not the event the chain head recorded "
                                        f"(its hash differs: the last event was replaced)")
    if count != head_count:
        return Break(last_id, "deleted", f"{count} events but {head_count} were appended: "
                                         f"{head_count - count} rows were deleted and the chain was patched")
    return None


def _check_anchor(db: Db, anchor: Anchor) -> Break | None:
    row = first_row(db, "SELECT hash FROM events WHERE id = ?", anchor.event_id)
    if row is None:
        return Break(anchor.event_id, "anchor", f"the anchored event #{anchor.event_id} is no longer in the log "
                                                f"(the log was truncated or renumbered)")
    if not str(row["hash"]).startswith(anchor.hash.lower()):
        return Break(anchor.event_id, "anchor", f"event #{anchor.event_id} no longer has the anchored hash "
                                                f"{anchor.hash}: the chain was rewritten from there or before")
    return None


def parse_anchor(text: str) -> Anchor:
    """``ID:HASH`` as printed by ``proofbot audit verify`` (a hash prefix of 12+ hex digits is enough)."""
    event_id, _, digest = text.partition(":")
    if not event_id.isdigit() or len(digest) < 12 or any(c not in "0123456789abcdefABCDEF" for c in digest):
        raise UsageError(f"bad anchor {text!r}", hint="use ID:HASH as printed by `proofbot audit verify`")
    return Anchor(int(event_id), digest)
