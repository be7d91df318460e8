"""The audit DB's schema on PostgreSQL: a list parallel to commands/store/migrations.py (same versions, same
descriptions, the same tables, views, columns, indexes and trigger names), never editing the SQLite ones.

Only what SQLite and PostgreSQL spell differently is written here: column types, the triggers (plpgsql
functions, one per trigger, named as the trigger) and three SQLite functions the views call
(``json_extract``, ``json_array_length``, ``instr``), defined once so that every view and index
statement of the SQLite migrations runs here as it is written there, the one copy of that SQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.store.migrations import LEASE_COLUMNS, MIGRATIONS, statements

if TYPE_CHECKING:
    from commands.store.handle import Db

# SQLite's functions for the paths the views use ('$', '$.a.b'): text (JSON true is 'true', where SQLite
# gives 1), NULL for a missing path; json_array_length gives 0 for what is not an array, as SQLite does.
COMPAT_FUNCTIONS = [
    """CREATE FUNCTION json_extract(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE STRICT
       AS $$ SELECT (doc::jsonb) #>> string_to_array(substr(path, 3), '.') $$""",
    """CREATE FUNCTION json_array_length(doc text, path text) RETURNS integer LANGUAGE sql IMMUTABLE STRICT
       AS $$ SELECT CASE WHEN v IS NULL THEN NULL WHEN jsonb_typeof(v) = 'array' THEN jsonb_array_length(v)
                         ELSE 0 END
             FROM (SELECT (doc::jsonb) #> string_to_array(substr(path, 3), '.') AS v) AS found $$""",
    """CREATE FUNCTION instr(haystack text, needle text) RETURNS integer LANGUAGE sql IMMUTABLE STRICT
       AS $$ SELECT strpos(haystack, needle) $$""",
]

# Each guard trigger's function body: chain.py checks a PostgreSQL DB's guards against exactly these.
GUARD_BODIES = {
    "events_are_append_only_update": "BEGIN RAISE EXCEPTION 'audit events are append-only'; END",
    "events_are_append_only_delete": "BEGIN RAISE EXCEPTION 'audit events are append-only'; END",
    "events_move_chain_head": """BEGIN
        UPDATE chain_head SET event_id = NEW.id, hash = NEW.hash, events = events + 1, at = NEW.at WHERE id = 1;
        RETURN NULL;
    END""",
    "chain_head_follows_appends": """BEGIN
        IF NEW.event_id IS DISTINCT FROM (SELECT MAX(id) FROM events)
           OR NEW.hash IS DISTINCT FROM (SELECT hash FROM events WHERE id = NEW.event_id)
           OR NEW.events IS DISTINCT FROM OLD.events + 1 THEN
            RAISE EXCEPTION 'the chain head only follows appended events';
        END IF;
        RETURN NEW;
    END""",
    "chain_head_is_kept": "BEGIN RAISE EXCEPTION 'the chain head is part of the audit log'; END",
}
# A statement-level DELETE trigger that also fires on TRUNCATE (which skips row triggers).
_GUARDS_ON = {
    "events_are_append_only_update": "BEFORE UPDATE ON events FOR EACH STATEMENT",
    "events_are_append_only_delete": "BEFORE DELETE OR TRUNCATE ON events FOR EACH STATEMENT",
    "events_move_chain_head": "AFTER INSERT ON events FOR EACH ROW",
    "chain_head_follows_appends": "BEFORE UPDATE ON chain_head FOR EACH ROW",
    "chain_head_is_kept": "BEFORE DELETE OR TRUNCATE ON chain_head FOR EACH STATEMENT",
}


def guard(name: str) -> list[str]:
    return [f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ {GUARD_BODIES[name]} $$",
            f"CREATE TRIGGER {name} {_GUARDS_ON[name]} EXECUTE FUNCTION {name}()"]


def portable(version: int) -> list[str]:
    """The SQLite migration's statements that PostgreSQL runs as written: views and indexes."""
    return [statement for statement in statements(MIGRATIONS[version - 1][1])
            if statement.split()[:2] in (["CREATE", "VIEW"], ["DROP", "VIEW"], ["CREATE", "INDEX"])]


SCHEMA_MIGRATIONS = ("CREATE TABLE IF NOT EXISTS schema_migrations "
                     "(version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)")

_TABLES: dict[int, list[str]] = {
    1: [*COMPAT_FUNCTIONS, """
        CREATE TABLE events (
            id BIGINT PRIMARY KEY, at TEXT NOT NULL, operation_id TEXT, operation TEXT, host TEXT,
            kind TEXT NOT NULL, actor TEXT, details TEXT NOT NULL DEFAULT '{}', prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL UNIQUE)""",
        *guard("events_are_append_only_update"), *guard("events_are_append_only_delete")],
    2: ["""
        CREATE TABLE locks (
            host TEXT PRIMARY KEY, operation_id TEXT NOT NULL, operation TEXT NOT NULL, holder TEXT NOT NULL,
            pid INTEGER NOT NULL, machine TEXT NOT NULL, acquired_at TEXT NOT NULL, channel TEXT, thread_ts TEXT)""",
        """
        CREATE TABLE plans (
            id TEXT PRIMARY KEY, operation TEXT NOT NULL, host TEXT NOT NULL, requested_by TEXT NOT NULL,
            created_at TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL, plan_hash TEXT NOT NULL,
            details TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', decided_by TEXT, decided_at TEXT,
            channel TEXT, message_ts TEXT)"""],
    3: ["""
        CREATE TABLE chain_head (
            id INTEGER PRIMARY KEY CHECK (id = 1), event_id BIGINT NOT NULL, hash TEXT NOT NULL,
            events BIGINT NOT NULL, at TEXT)""",
        # The SQLite migration's own INSERT: it is portable.
        next(s for s in statements(MIGRATIONS[2][1]) if s.startswith("INSERT INTO chain_head")),
        *guard("events_move_chain_head"), *guard("chain_head_follows_appends"), *guard("chain_head_is_kept")],
    # REAL is 4 bytes here (SQLite's is 8): an epoch second in it would be off by a minute.
    9: [f"ALTER TABLE {table} ADD COLUMN {column.replace('REAL', 'DOUBLE PRECISION')}"
        for table, column in LEASE_COLUMNS],
    10: ["""CREATE TABLE deliveries (id TEXT PRIMARY KEY, kind TEXT NOT NULL, claimed_at DOUBLE PRECISION NOT NULL,
                                    replica TEXT NOT NULL)"""],
}

PG_MIGRATIONS: list[tuple[str, list[str]]] = [
    (description, [*_TABLES.get(version, []), *portable(version)])
    for version, (description, _) in enumerate(MIGRATIONS, start=1)
]


def apply_pending_pg(db: Db, version: int) -> None:
    """Apply one migration inside the caller's write transaction (advisory lock held), unless applied."""
    from commands.clock import utc_now

    if next(db.query("SELECT 1 AS done FROM schema_migrations WHERE version = ?", [version]), None):
        return
    description, sql = PG_MIGRATIONS[version - 1]
    for statement in sql:
        db.execute(statement)
    db.table("schema_migrations").insert({"version": version, "description": description, "applied_at": utc_now()})
