"""Plain SQL on a test's store, on either backend, as someone with the database's powers would run it (no
proofbot in between): a sqlite3 connection to the file, or a psycopg one to the schema. ``?`` placeholders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from commands.store.pg import pg_sql

# Each guard trigger's table: PostgreSQL's DROP TRIGGER names it.
TRIGGER_TABLES = {"events_are_append_only_update": "events", "events_are_append_only_delete": "events",
                  "events_move_chain_head": "events", "chain_head_follows_appends": "chain_head",
                  "chain_head_is_kept": "chain_head"}


OPENED: list[Raw] = []  # closed when the test ends (tests/store_backends.py store_target)


class Raw:
    """One autocommit connection to the target's database."""

    def __init__(self, target: Path | str) -> None:
        OPENED.append(self)
        self.postgres = isinstance(target, str)
        if self.postgres:
            import psycopg

            self.conn: Any = psycopg.connect(str(target), autocommit=True)
        else:
            import sqlite3

            self.conn = sqlite3.connect(target, isolation_level=None)

    @property
    def error(self) -> type[Exception]:
        if self.postgres:
            import psycopg

            return psycopg.Error
        import sqlite3

        return sqlite3.DatabaseError

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        if self.postgres:
            return self.conn.execute(pg_sql(sql) if params else sql, list(params) or None)
        return self.conn.execute(sql, params)

    def all(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.execute(sql, params).fetchall()]

    def drop_trigger(self, name: str) -> None:
        self.execute(f"DROP TRIGGER {name} ON {TRIGGER_TABLES[name]}" if self.postgres else f"DROP TRIGGER {name}")

    def close(self) -> None:
        self.conn.close()


def raw(target: Path | str) -> Raw:
    return Raw(target)


def close_opened() -> None:
    while OPENED:
        OPENED.pop().close()


def rows(target: Path | str, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
    """One query's rows, on a connection of its own."""
    conn = Raw(target)
    try:
        return conn.all(sql, params)
    finally:
        conn.close()
