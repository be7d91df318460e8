"""The audit log: append-only events in SQLite, each carrying the hash of the one before it.

One worker thread owns the connection and runs every transaction, so the event loop never
blocks on SQLite; each append reads the chain head and inserts in one IMMEDIATE transaction,
so two processes cannot fork the chain. Rows are read as dicts (sqlite-utils) and become
dataclasses by column name. See README "Audit trail".

Schema changes are the numbered MIGRATIONS, applied by a small runner rather than
sqlite-utils' ``Migrations`` (4.0+): that one keeps its records in its own
``_sqlite_migrations`` table, by name, while every audit DB already records its versions in
``schema_migrations``, so adopting it means copying the records over and dropping the
documented table (after which an older proofbot would re-run migration 1 on the DB); and it
picks the pending migrations before taking the write lock, so a bot and a CLI opening one
DB at once could both apply the same one. The runner re-checks under BEGIN IMMEDIATE.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from commands.errors import UsageError
from commands.operation import utc_now
from commands.redact import redact_data

if TYPE_CHECKING:
    import sqlite_utils

GENESIS_HASH = "0" * 64
DB_ENV = "PROOFBOT_DB"
DEFAULT_DB = "proofbot.db"
T = TypeVar("T")
D = TypeVar("D")
SCHEMA_MIGRATIONS = ("CREATE TABLE IF NOT EXISTS schema_migrations "
                     "(version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)")

MIGRATIONS: list[tuple[str, str]] = [
    (
        "events table (append-only, hash-chained) and operations view",
        """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            operation_id TEXT,
            operation TEXT,
            host TEXT,
            kind TEXT NOT NULL,
            actor TEXT,
            details TEXT NOT NULL DEFAULT '{}',
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL UNIQUE
        );
        CREATE INDEX events_host_at ON events(host, at);
        CREATE INDEX events_operation_kind ON events(operation_id, kind);
        CREATE INDEX events_kind_at ON events(kind, at);
        CREATE TRIGGER events_are_append_only_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
        CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
        CREATE VIEW operations AS
            SELECT r.operation_id AS id, r.operation, r.host, r.actor AS requested_by,
                   r.at AS requested_at,
                   json_extract(r.details, '$.origin.via') AS via,
                   json_extract(r.details, '$.origin.channel') AS channel,
                   json_extract(r.details, '$.origin.thread_ts') AS thread_ts,
                   f.at AS finished_at,
                   json_extract(f.details, '$.verdict') AS verdict
            FROM events r
            LEFT JOIN events f ON f.operation_id = r.operation_id AND f.kind = 'finished'
            WHERE r.kind = 'requested';
        """,
    ),
    (
        "locks (one mutating operation per host) and plans awaiting approval",
        """
        CREATE TABLE locks (
            host TEXT PRIMARY KEY,
            operation_id TEXT NOT NULL,
            operation TEXT NOT NULL,
            holder TEXT NOT NULL,
            pid INTEGER NOT NULL,
            machine TEXT NOT NULL,
            acquired_at TEXT NOT NULL,
            channel TEXT,
            thread_ts TEXT
        );
        CREATE TABLE plans (
            id TEXT PRIMARY KEY,
            operation TEXT NOT NULL,
            host TEXT NOT NULL,
            requested_by TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at REAL NOT NULL,
            plan_hash TEXT NOT NULL,
            details TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending',
            decided_by TEXT,
            decided_at TEXT,
            channel TEXT,
            message_ts TEXT
        );
        CREATE INDEX plans_state_expiry ON plans(state, expires_at);
        """,
    ),
    (
        "chain_head: the last event's id and hash and the event count, moved by a trigger on each append; "
        "index for the audit trail",
        # The head is the anchor that makes deleting the LAST rows (truncation) evident; see
        # commands/store/chain.py. It only ever follows the real head, one append at a time.
        f"""
        CREATE TABLE chain_head (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            event_id INTEGER NOT NULL,
            hash TEXT NOT NULL,
            events INTEGER NOT NULL,
            at TEXT
        );
        INSERT INTO chain_head (id, event_id, hash, events, at)
            SELECT 1, COALESCE(MAX(id), 0),
                   COALESCE((SELECT hash FROM events ORDER BY id DESC LIMIT 1), '{GENESIS_HASH}'),
                   COUNT(*), (SELECT at FROM events ORDER BY id DESC LIMIT 1)
            FROM events;
        CREATE TRIGGER events_move_chain_head AFTER INSERT ON events BEGIN
            UPDATE chain_head SET event_id = NEW.id, hash = NEW.hash, events = events + 1, at = NEW.at
            WHERE id = 1;
        END;
        CREATE TRIGGER chain_head_follows_appends BEFORE UPDATE ON chain_head
            WHEN NEW.event_id IS NOT (SELECT MAX(id) FROM events)
              OR NEW.hash IS NOT (SELECT hash FROM events WHERE id = NEW.event_id)
              OR NEW.events IS NOT OLD.events + 1
            BEGIN SELECT RAISE(ABORT, 'the chain head only follows appended events'); END;
        CREATE TRIGGER chain_head_is_kept BEFORE DELETE ON chain_head
            BEGIN SELECT RAISE(ABORT, 'the chain head is part of the audit log'); END;
        CREATE INDEX events_kind_host ON events(kind, host);
        """,
    ),
    (
        "operations view: who approved or rejected, and the last word on each operation",
        """
        DROP VIEW operations;
        CREATE VIEW operations AS
            SELECT r.operation_id AS id, r.operation, r.host, r.actor AS requested_by,
                   r.at AS requested_at,
                   json_extract(r.details, '$.origin.via') AS via,
                   json_extract(r.details, '$.origin.channel') AS channel,
                   json_extract(r.details, '$.origin.thread_ts') AS thread_ts,
                   (SELECT d.kind FROM events d WHERE d.operation_id = r.operation_id
                      AND d.kind IN ('approved', 'rejected', 'expired') ORDER BY d.id LIMIT 1) AS decision,
                   (SELECT d.actor FROM events d WHERE d.operation_id = r.operation_id
                      AND d.kind IN ('approved', 'rejected') ORDER BY d.id LIMIT 1) AS decided_by,
                   f.at AS finished_at,
                   json_extract(f.details, '$.verdict') AS verdict
            FROM events r
            LEFT JOIN events f ON f.id = (SELECT MAX(x.id) FROM events x
                                          WHERE x.operation_id = r.operation_id AND x.kind = 'finished')
            WHERE r.kind = 'requested';
        """,
    ),
    (
        "Datasette-ready views: operations keyed by operation_id; refusals and views of the trail apart",
        """
        DROP VIEW operations;
        CREATE VIEW operations AS
            SELECT r.operation_id AS operation_id, r.operation, r.host, r.actor AS requested_by,
                   r.at AS requested_at,
                   json_extract(r.details, '$.origin.via') AS via,
                   json_extract(r.details, '$.origin.channel') AS channel,
                   json_extract(r.details, '$.origin.thread_ts') AS thread_ts,
                   (SELECT d.kind FROM events d WHERE d.operation_id = r.operation_id
                      AND d.kind IN ('approved', 'rejected', 'expired') ORDER BY d.id LIMIT 1) AS decision,
                   (SELECT d.actor FROM events d WHERE d.operation_id = r.operation_id
                      AND d.kind IN ('approved', 'rejected') ORDER BY d.id LIMIT 1) AS decided_by,
                   f.at AS finished_at,
                   json_extract(f.details, '$.verdict') AS verdict
            FROM events r
            LEFT JOIN events f ON f.id = (SELECT MAX(x.id) FROM events x
                                          WHERE x.operation_id = r.operation_id AND x.kind = 'finished')
            WHERE r.kind = 'requested';
        CREATE VIEW refusals AS
            SELECT id AS event_id, at, kind, operation, host, actor,
                   json_extract(details, '$.reason') AS reason,
                   json_extract(details, '$.requested_host') AS requested_host,
                   json_extract(details, '$.origin.via') AS via
            FROM events WHERE kind IN ('refused', 'viewed');
        """,
    ),
    (
        "fleets: operations name the fleet a host's part belongs to; the listing across hosts is indexed",
        """
        DROP VIEW operations;
        CREATE VIEW operations AS
            SELECT r.operation_id AS operation_id, r.operation, r.host, r.actor AS requested_by,
                   r.at AS requested_at,
                   json_extract(r.details, '$.origin.via') AS via,
                   json_extract(r.details, '$.origin.channel') AS channel,
                   json_extract(r.details, '$.origin.thread_ts') AS thread_ts,
                   (SELECT d.kind FROM events d WHERE d.operation_id = r.operation_id
                      AND d.kind IN ('approved', 'rejected', 'expired') ORDER BY d.id LIMIT 1) AS decision,
                   (SELECT d.actor FROM events d WHERE d.operation_id = r.operation_id
                      AND d.kind IN ('approved', 'rejected') ORDER BY d.id LIMIT 1) AS decided_by,
                   f.at AS finished_at,
                   json_extract(f.details, '$.verdict') AS verdict,
                   json_extract(r.details, '$.fleet.target') AS fleet_target,
                   json_array_length(r.details, '$.fleet.hosts') AS fleet_hosts,
                   json_extract(r.details, '$.fleet_operation_id') AS fleet_operation_id
            FROM events r
            LEFT JOIN events f ON f.id = (SELECT MAX(x.id) FROM events x
                                          WHERE x.operation_id = r.operation_id AND x.kind = 'finished')
            WHERE r.kind = 'requested';
        CREATE INDEX events_listed_requests ON events(id)
            WHERE kind = 'requested' AND json_extract(details, '$.fleet_operation_id') IS NULL;
        """,
    ),
    (
        "operations view: every ended operation has a verdict and an end (refused, cancelled, interrupted, "
        "rejected, expired), and approval in the CLI's words",
        # As commands/store/trail.py tells an operation: the last `finished` gives the verdict, else the
        # first refusal, cancel, interruption or decision that ended it. `approval` is
        # bot/plain_text.py approval_words' wording; restore and restart are the operations that need
        # one (commands/registry.py; tests/test_datasette_metadata.py holds the two together).
        """
        DROP VIEW operations;
        CREATE VIEW operations AS
            SELECT r.operation_id AS operation_id, r.operation, r.host, r.actor AS requested_by,
                   r.at AS requested_at,
                   json_extract(r.details, '$.origin.via') AS via,
                   json_extract(r.details, '$.origin.channel') AS channel,
                   json_extract(r.details, '$.origin.thread_ts') AS thread_ts,
                   d.kind AS decision,
                   CASE WHEN d.kind IN ('approved', 'rejected') THEN d.actor END AS decided_by,
                   CASE d.kind WHEN 'approved' THEN 'approved by ' || d.actor
                               WHEN 'rejected' THEN 'rejected by ' || d.actor
                               WHEN 'expired' THEN 'approval expired'
                               ELSE CASE WHEN r.operation IN ('restore', 'restart') THEN 'no approval recorded'
                                         ELSE 'no approval needed' END END AS approval,
                   COALESCE(f.at, e.at) AS finished_at,
                   CASE WHEN f.id IS NOT NULL THEN COALESCE(json_extract(f.details, '$.verdict'), 'unknown')
                        ELSE e.kind END AS verdict,
                   json_extract(r.details, '$.fleet.target') AS fleet_target,
                   json_array_length(r.details, '$.fleet.hosts') AS fleet_hosts,
                   json_extract(r.details, '$.fleet_operation_id') AS fleet_operation_id
            FROM events r
            LEFT JOIN events d ON d.id = (SELECT MIN(x.id) FROM events x WHERE x.operation_id = r.operation_id
                                          AND x.kind IN ('approved', 'rejected', 'expired'))
            LEFT JOIN events f ON f.id = (SELECT MAX(x.id) FROM events x
                                          WHERE x.operation_id = r.operation_id AND x.kind = 'finished')
            LEFT JOIN events e ON e.id = (SELECT MIN(x.id) FROM events x WHERE x.operation_id = r.operation_id
                                          AND x.kind IN ('rejected', 'expired', 'refused', 'interrupted',
                                                         'cancelled'))
            WHERE r.kind = 'requested';
        """,
    ),
]


@dataclass(frozen=True)
class Event:
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


def first_row(db: sqlite_utils.Database, sql: str, *params: Any) -> dict[str, Any] | None:
    """The first row of a query as a dict, or None."""
    return next(db.query(sql, params), None)


def db_path(explicit: str | None) -> Path:
    return Path(explicit or os.environ.get(DB_ENV) or DEFAULT_DB)


class AuditStore:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proofbot-audit")

    @classmethod
    def open(cls, path: Path) -> AuditStore:
        try:
            if path.parent and not path.parent.exists():
                raise UsageError(f"audit database folder {path.parent} does not exist", hint="pass --db PATH")
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=10)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise UsageError(f"cannot open audit database {path}: {exc}", hint="pass --db PATH") from None
        import sqlite_utils  # ~70 ms of imports: a verify loads it here, while its SSH handshake runs

        store = cls(sqlite_utils.Database(conn))
        try:
            store._worker.submit(store._migrate).result()
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._db.conn.close()

    def _migrate(self) -> None:
        self._db.execute(SCHEMA_MIGRATIONS)
        applied = {row["version"] for row in self._db.query("SELECT version FROM schema_migrations")}
        for version, (description, sql) in enumerate(MIGRATIONS, start=1):
            if version not in applied:
                self._atomic("BEGIN IMMEDIATE", functools.partial(_apply, version=version, description=description,
                                                                    sql=sql))

    def _atomic(self, begin: str, work: Callable[[sqlite_utils.Database], T]) -> T:
        """work(db) between ``begin`` and COMMIT, rolled back if it raises; only ever on the worker thread."""
        conn = self._db.conn
        conn.execute(begin)
        try:
            value = work(self._db)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a RAISE(ROLLBACK) or a failed COMMIT may have ended it already
                conn.execute("ROLLBACK")
            raise
        return value

    async def _run(self, work: Callable[[], T]) -> T:
        # One worker thread owns the connection: work never overlaps, even when the task
        # awaiting it is cancelled mid-way (a cancelled to_thread would keep running
        # while the next call started on the same connection).
        return await asyncio.get_running_loop().run_in_executor(self._worker, work)

    async def write(self, work: Callable[[sqlite_utils.Database], T]) -> T:
        """Run work(db) in one IMMEDIATE transaction, in the store's worker thread.

        ``db.query`` yields dict rows; materialise them inside ``work``: the transaction ends with it."""
        return await self._run(lambda: self._atomic("BEGIN IMMEDIATE", work))

    async def snapshot(self, query: Callable[[sqlite_utils.Database], T]) -> T:
        """Run query(db) in one read transaction: a consistent snapshot that never blocks writers (WAL)."""
        return await self._run(lambda: self._atomic("BEGIN DEFERRED", query))

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``write`` with the raw connection (tests and the bench use it)."""
        return await self.write(lambda db: work(db.conn))

    async def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """``snapshot`` with the raw connection (tests and the bench use it)."""
        return await self.snapshot(lambda db: query(db.conn))

    async def append(self, kind: str, *, operation_id: str | None = None, operation: str | None = None,
                     host: str | None = None, actor: str | None = None,
                     details: dict[str, Any] | None = None) -> Event:
        """Append one event to the chain and return it as stored."""
        payload = _plain(details)  # as it is now: the caller's dict may change before the worker gets to it
        return await self.write(lambda db: append_event(db, kind, operation_id=operation_id, operation=operation,
                                                        host=host, actor=actor, details=payload))

    async def events_of(self, operation_id: str) -> list[Event]:
        return await self.snapshot(lambda db: [
            event_of(row) for row in db.query("SELECT * FROM events WHERE operation_id = ? ORDER BY id",
                                              [operation_id])])


def append_event(db: sqlite_utils.Database, kind: str, *, operation_id: str | None = None,
                 operation: str | None = None, host: str | None = None, actor: str | None = None,
                 details: dict[str, Any] | None = None) -> Event:
    """Append one event after the current head, inside the caller's IMMEDIATE transaction (``store.write``),
    which keeps the head still; a change to another table can so be logged atomically with it."""
    payload = redact_data(_plain(details))  # the last gate: nothing reaches the log unmasked
    head = first_row(db, "SELECT hash FROM events ORDER BY id DESC LIMIT 1")
    fields: dict[str, Any] = {"at": utc_now(), "operation_id": operation_id, "operation": operation, "host": host,
                              "kind": kind, "actor": actor, "details": payload,
                              "prev_hash": head["hash"] if head else GENESIS_HASH}
    digest = event_hash(fields)
    table = db.table("events").insert({**fields, "details": stored_details(payload), "hash": digest})
    return Event(id=int(table.last_rowid or 0), hash=digest, **fields)


def stored_details(details: Any) -> str:
    """The exact text an event's details are stored as (the chain check demands exactly this)."""
    return json.dumps(details, sort_keys=True, ensure_ascii=False)


def _plain(details: dict[str, Any] | None) -> dict[str, Any]:
    """Details as JSON will store them (paths, dates and the like become strings)."""
    value: dict[str, Any] = json.loads(json.dumps(details or {}, default=str))
    return value


def event_of(row: Mapping[str, Any]) -> Event:
    return from_row(Event, row, details=json.loads(row["details"]))


def _apply(db: sqlite_utils.Database, version: int, description: str, sql: str) -> None:
    # Another process may have applied it since this one looked: only the check under the write lock counts.
    if first_row(db, "SELECT 1 AS done FROM schema_migrations WHERE version = ?", version):
        return
    for statement in statements(sql):
        db.execute(statement)
    db.table("schema_migrations").insert({"version": version, "description": description, "applied_at": utc_now()})


def statements(sql: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, current = [], ""
    for line in sql.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
