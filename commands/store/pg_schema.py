"""A PostgreSQL audit DB's schema read from its catalogs (the current schema only), in the shape
commands/store/schema.py compares: tables, views, indexes and enabled triggers by name, each guard
trigger with its function's body, so ``audit verify`` names what was added, dropped, disabled or rewritten.

Expected is SQLite's schema by name and type (the same objects on both backends, pg_migrations.py), with
the guard functions' bodies as pg_migrations.py writes them. Table and view definitions are compared by
name only here (SQLite compares their SQL too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.store.pg_migrations import GUARD_BODIES
from commands.store.schema import SchemaObject, expected_schema, normalised, schema_from

if TYPE_CHECKING:
    from commands.store.handle import Db

# Indexes PostgreSQL makes for a PRIMARY KEY or UNIQUE constraint are left out, as SQLite's autoindexes
# (no SQL) are; a trigger that is disabled (ALTER TABLE … DISABLE TRIGGER) is left out: it guards nothing.
CATALOG = """
    SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' ELSE 'index' END AS type,
           c.relname AS name, COALESCE(t.relname, c.relname) AS tbl_name, '' AS sql
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'i')
      AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = c.oid)
    UNION ALL
    SELECT 'trigger', g.tgname, t.relname, p.prosrc
    FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid JOIN pg_namespace n ON n.oid = t.relnamespace
    JOIN pg_proc p ON p.oid = g.tgfoid
    WHERE n.nspname = current_schema() AND NOT g.tgisinternal AND g.tgenabled <> 'D'
"""


def pg_present(db: Db) -> dict[str, SchemaObject]:
    return schema_from(db.query(CATALOG))


def pg_expected() -> dict[str, SchemaObject]:
    found = {}
    for name, thing in expected_schema().items():
        if thing.type != "trigger" and not thing.sql:  # SQLite's own autoindex
            continue
        sql = normalised(GUARD_BODIES.get(name, "")) if thing.type == "trigger" else ""
        found[name] = SchemaObject(thing.type, name, thing.table, sql)
    return found


def pg_guard_sql() -> dict[str, str]:
    return {name: normalised(body) for name, body in GUARD_BODIES.items()}


def pg_has_table(db: Db, name: str) -> bool:
    """Asked before reading a table that may have been dropped: an error would end PostgreSQL's transaction."""
    return next(db.query("SELECT to_regclass(?) IS NOT NULL AS found", [name]))["found"] is True
