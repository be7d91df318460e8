"""The audit DB's schema as numbered migrations, and the runner that applies the pending ones.

Migrations are never edited once released (a DB upgraded from an older proofbot ran their text, and
commands/store/schema.py compares against it); a change is a new one at the end. The newer views are
built from commands/vocabulary.py, so the SQL names the same kinds, verdicts and operations the code writes.

The runner is small and our own rather than sqlite-utils' ``Migrations`` (4.0+): that one keeps its
records in its own ``_sqlite_migrations`` table, by name, while every audit DB already records its
versions in ``schema_migrations``, so adopting it means copying the records over and dropping the
documented table (after which an older proofbot would re-run migration 1 on the DB); and it picks the
pending migrations before taking the write lock, so a bot and a CLI opening one DB at once could both
apply the same one. The runner re-checks under BEGIN IMMEDIATE.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from commands.clock import utc_now
from commands.store import SCHEMA_VERSION
from commands.store.events import GENESIS_HASH, sql_list
from commands.vocabulary import ENDING_KINDS, EventKind, Operation

if TYPE_CHECKING:
    from commands.store.handle import Db

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
        # bot/words.py approval_words' wording; restore and restart are the operations that need
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


K = EventKind
DECISIONS = (K.APPROVED, K.REJECTED, K.EXPIRED)
# The operations that need an approval (commands/registry.py; tests/test_datasette_metadata.py holds them
# together): a rolling restart is one of them (migration 7 forgot it).
NEEDS_APPROVAL = (Operation.RESTORE, Operation.RESTART, Operation.ROLLOUT)
# What ends an operation without a `finished` event, as commands/store/trail.py reads it.
ENDED_WITHOUT_VERDICT = (ENDING_KINDS | {K.REJECTED, K.EXPIRED}) - {K.FINISHED}
# A refusal's requested host and front-end: one shape since migration 8 (``requested_host`` and
# ``origin``, both front-ends); Slack wrote ``{reason, text, channel}`` before it, so an old Slack row's
# front-end is told by its actor (slack:U…) and its channel; a refusal inside an operation (plan void,
# host busy) names its host in the column and its front-end in the operation's request.
# An old Slack refusal's host is the first word of its command's text, as the Slack writer now records it.
FIRST_WORD = ("NULLIF(substr(trim(json_extract(e.details, '$.text')), 1, "
              "instr(trim(json_extract(e.details, '$.text')) || ' ', ' ') - 1), '')")
REQUEST_ORIGIN = (f"(SELECT json_extract(q.details, '$.origin.via') FROM events q "
                  f"WHERE q.operation_id = e.operation_id AND q.kind = '{K.REQUESTED}' ORDER BY q.id LIMIT 1)")

MIGRATIONS.append((
    "refusals: one shape for both front-ends (requested_host, origin), old Slack rows read too; operations "
    "built from the vocabulary, a rollout needs an approval",
    f"""
    DROP VIEW refusals;
    CREATE VIEW refusals AS
        SELECT e.id AS event_id, e.at, e.kind, e.operation, e.operation_id, e.host, e.actor,
               json_extract(e.details, '$.reason') AS reason,
               COALESCE(json_extract(e.details, '$.requested_host'), e.host, {FIRST_WORD}) AS requested_host,
               COALESCE(json_extract(e.details, '$.origin.via'),
                        CASE WHEN e.actor LIKE 'slack:%' THEN 'slack' END, {REQUEST_ORIGIN}) AS via,
               COALESCE(json_extract(e.details, '$.origin.channel'), json_extract(e.details, '$.channel')) AS channel,
               json_extract(e.details, '$.text') AS text
        FROM events e WHERE e.kind IN {sql_list((K.REFUSED, K.VIEWED))};
    DROP VIEW operations;
    CREATE VIEW operations AS
        SELECT r.operation_id AS operation_id, r.operation, r.host, r.actor AS requested_by,
               r.at AS requested_at,
               json_extract(r.details, '$.origin.via') AS via,
               json_extract(r.details, '$.origin.channel') AS channel,
               json_extract(r.details, '$.origin.thread_ts') AS thread_ts,
               d.kind AS decision,
               CASE WHEN d.kind IN {sql_list((K.APPROVED, K.REJECTED))} THEN d.actor END AS decided_by,
               CASE d.kind WHEN '{K.APPROVED}' THEN 'approved by ' || d.actor
                           WHEN '{K.REJECTED}' THEN 'rejected by ' || d.actor
                           WHEN '{K.EXPIRED}' THEN 'approval expired'
                           ELSE CASE WHEN r.operation IN {sql_list(NEEDS_APPROVAL)} THEN 'no approval recorded'
                                     ELSE 'no approval needed' END END AS approval,
               COALESCE(f.at, e.at) AS finished_at,
               CASE WHEN f.id IS NOT NULL THEN COALESCE(json_extract(f.details, '$.verdict'), 'unknown')
                    ELSE e.kind END AS verdict,
               json_extract(r.details, '$.fleet.target') AS fleet_target,
               json_array_length(r.details, '$.fleet.hosts') AS fleet_hosts,
               json_extract(r.details, '$.fleet_operation_id') AS fleet_operation_id
        FROM events r
        LEFT JOIN events d ON d.id = (SELECT MIN(x.id) FROM events x WHERE x.operation_id = r.operation_id
                                      AND x.kind IN {sql_list(DECISIONS)})
        LEFT JOIN events f ON f.id = (SELECT MAX(x.id) FROM events x
                                      WHERE x.operation_id = r.operation_id AND x.kind = '{K.FINISHED}')
        LEFT JOIN events e ON e.id = (SELECT MIN(x.id) FROM events x WHERE x.operation_id = r.operation_id
                                      AND x.kind IN {sql_list(ENDED_WITHOUT_VERDICT)})
        WHERE r.kind = '{K.REQUESTED}';
    """,
))


def apply_pending(db: Db, version: int, description: str, sql: str) -> None:
    """Apply one migration inside the caller's IMMEDIATE transaction, unless it is applied already."""
    # Another process may have applied it since this one looked: only the check under the write lock counts.
    if next(db.query("SELECT 1 AS done FROM schema_migrations WHERE version = ?", [version]), None):
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


# Migration 9 (commands/store/leases.py): a lock or a plan is held by one process (``lease_holder``) until
# ``lease_expires`` (epoch seconds), renewed while that process lives; an expired lease is a dead holder's,
# wherever it ran. Rows written before it have no lease: the PID rule alone applies to them.
LEASE_COLUMNS = [(table, column) for table in ("locks", "plans")
                 for column in ("lease_holder TEXT", "lease_expires REAL")]
MIGRATIONS.append((
    "leases: each lock and plan names the process that holds it and when its lease ends (renewed while it lives)",
    "\n".join(f"ALTER TABLE {table} ADD COLUMN {column};" for table, column in LEASE_COLUMNS),
))


# Migration 10 (commands/store/deliveries.py): each Slack delivery that may start something is claimed once, by
# its id, across every replica; a retry or a second delivery of it finds the row and starts nothing.
MIGRATIONS.append((
    "deliveries: one row per Slack delivery claimed (its event_id or payload digest), so a retry starts nothing",
    """
    CREATE TABLE deliveries (id TEXT PRIMARY KEY, kind TEXT NOT NULL, claimed_at REAL NOT NULL,
                             replica TEXT NOT NULL);
    CREATE INDEX deliveries_claimed_at ON deliveries(claimed_at);
    """,
))

if len(MIGRATIONS) != SCHEMA_VERSION:  # a DB at the old count would be taken as current (commands/store/db.py)
    raise RuntimeError(f"{len(MIGRATIONS)} migrations but commands/store/__init__.py's SCHEMA_VERSION is "
                       f"{SCHEMA_VERSION}: set it to the new count")
