"""The audit log: append-only events in SQLite, each carrying the hash of the one before it.

Schema changes are numbered migrations. Writes run in a worker thread behind a lock so
the event loop never blocks on SQLite, and each append reads the chain head and inserts
in one IMMEDIATE transaction, so two processes cannot fork the chain.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlite_utils

from commands.errors import UsageError
from commands.operation import utc_now

GENESIS_HASH = "0" * 64
DB_ENV = "PROOFBOT_DB"
DEFAULT_DB = "proofbot.db"
T = TypeVar("T")

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
        # commands/audit_chain.py. It only ever follows the real head, one append at a time.
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
        store = cls(sqlite_utils.Database(conn))
        store._migrate()
        return store

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=True)
        self._db.conn.close()

    def _migrate(self) -> None:
        conn = self._db.conn
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, (description, sql) in enumerate(MIGRATIONS, start=1):
            if version in applied:
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (version,)).fetchone():
                    conn.execute("COMMIT")
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, description, utc_now()))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def _run(self, work: Callable[[], T]) -> T:
        # One worker thread owns the connection: work never overlaps, even when the task
        # awaiting it is cancelled mid-way (a cancelled to_thread would keep running
        # while the next call started on the same connection).
        return await asyncio.get_running_loop().run_in_executor(self._worker, work)

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run work(conn) in one IMMEDIATE transaction, in the store's worker thread."""
        def run() -> T:
            conn = self._db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                value = work(conn)
                conn.execute("COMMIT")
                return value
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return await self._run(run)

    async def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """Run query(conn) in one read transaction: a consistent snapshot that never blocks writers (WAL)."""
        def run() -> T:
            conn = self._db.conn
            conn.execute("BEGIN DEFERRED")
            try:
                return query(conn)
            finally:
                conn.execute("COMMIT")
        return await self._run(run)

    async def append(self, kind: str, *, operation_id: str | None = None, operation: str | None = None,
                     host: str | None = None, actor: str | None = None,
                     details: dict[str, Any] | None = None) -> Event:
        """Append one event to the chain and return it as stored."""
        payload = json.loads(json.dumps(details or {}, default=str))
        return await self._run(lambda: self._append_now(kind, operation_id, operation, host, actor, payload))

    def _append_now(self, kind: str, operation_id: str | None, operation: str | None, host: str | None,
                    actor: str | None, details: dict[str, Any]) -> Event:
        conn = self._db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            head = conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
            fields = {"at": utc_now(), "operation_id": operation_id, "operation": operation, "host": host,
                      "kind": kind, "actor": actor, "details": details,
                      "prev_hash": head[0] if head else GENESIS_HASH}
            digest = event_hash(fields)
            cursor = conn.execute(
                "INSERT INTO events (at, operation_id, operation, host, kind, actor, details, prev_hash, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (fields["at"], operation_id, operation, host, kind, actor,
                 json.dumps(details, sort_keys=True, ensure_ascii=False), fields["prev_hash"], digest),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return Event(int(cursor.lastrowid or 0), str(fields["at"]), operation_id, operation, host, kind, actor,
                     details, str(fields["prev_hash"]), digest)

    async def events_of(self, operation_id: str) -> list[Event]:
        return await self._run(lambda: [
            _event(row) for row in self._db.query(
                "SELECT * FROM events WHERE operation_id = ? ORDER BY id", [operation_id])
        ])


def _event(row: dict[str, Any]) -> Event:
    return Event(row["id"], row["at"], row["operation_id"], row["operation"], row["host"], row["kind"],
                 row["actor"], json.loads(row["details"]), row["prev_hash"], row["hash"])


def _statements(sql: str) -> list[str]:
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
