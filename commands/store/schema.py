"""The audit DB's schema and column types held against what proofbot writes: a table, trigger, view or
index added, dropped or changed by hand, or a value of the wrong type, shows as such, never as a crash.

The expected schema is not a copy kept here: it is what the migrations create, run once on an in-memory
DB, so a new migration changes it with nothing else to update. A DB upgraded from an older proofbot ran
the same migration text, so it compares equal (tests/test_audit_upgrade.py).
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from commands.errors import ProofbotError
from commands.store.migrations import MIGRATIONS, SCHEMA_MIGRATIONS, statements

# Statistics tables ANALYZE and `PRAGMA optimize` may make (hold no code, change no result): not schema.
_STATISTICS = re.compile(r"^sqlite_stat[0-9]$")
MASTER = "SELECT type, name, tbl_name, sql FROM sqlite_master"


@dataclass(frozen=True)
class SchemaObject:
    type: str  # table | index | trigger | view
    name: str
    table: str
    sql: str  # whitespace folded; "" for an index SQLite makes itself (UNIQUE, a TEXT primary key)


def normalised(sql: str | None) -> str:
    return " ".join((sql or "").strip().rstrip(";").replace(";", " ; ").split())


def schema_from(rows: Iterable[Mapping[str, Any] | tuple[Any, ...]]) -> dict[str, SchemaObject]:
    """``sqlite_master`` rows (type, name, tbl_name, sql), by name (SQLite names are one namespace)."""
    found: dict[str, SchemaObject] = {}
    for row in rows:
        kind, name, table, sql = (row["type"], row["name"], row["tbl_name"], row["sql"]) \
            if isinstance(row, Mapping) else row
        if kind == "table" and _STATISTICS.match(str(name)):
            continue
        found[str(name)] = SchemaObject(str(kind), str(name), str(table), normalised(sql))
    return found


@functools.cache
def expected_schema() -> dict[str, SchemaObject]:
    """Every migration run, as ``AuditStore`` runs them, on an empty in-memory DB."""
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        conn.execute(SCHEMA_MIGRATIONS)
        for _, sql in MIGRATIONS:
            for statement in statements(sql):
                conn.execute(statement)
        return schema_from(conn.execute(MASTER).fetchall())


@dataclass(frozen=True)
class SchemaDifference:
    """One object that is not as the migrations made it."""

    type: str
    name: str
    change: str  # added | missing | changed | "is a view now"…
    sql: str  # as found ("" when missing)

    @property
    def short(self) -> str:
        return f"{self.type} {self.name} {self.change}"

    def to_json(self) -> dict[str, str]:
        return {"type": self.type, "name": self.name, "change": self.change, "sql": self.sql}


def schema_differences(present: Mapping[str, SchemaObject],
                       expected: Mapping[str, SchemaObject] | None = None) -> tuple[SchemaDifference, ...]:
    """What differs from the migrations' schema (``expected``, SQLite's by default), each naming the object:
    added, missing or changed."""
    expected = expected_schema() if expected is None else expected
    differences = []
    for name in sorted(expected.keys() | present.keys()):
        want, have = expected.get(name), present.get(name)
        if want is None and have is not None:
            differences.append(SchemaDifference(have.type, name, f"added (on {have.table})", have.sql))
        elif have is None and want is not None:
            differences.append(SchemaDifference(want.type, name, f"missing (on {want.table})", ""))
        elif want is not None and have is not None and want != have:
            change = f"is a {have.type} now" if want.type != have.type else "changed"
            differences.append(SchemaDifference(want.type, name, change, have.sql))
    return tuple(differences)


class AuditLogCorrupt(ProofbotError):
    """A row holds what no append writes (a BLOB where text goes): it cannot be read as an event."""

    exit_code = 3


def wrong_types(row: Mapping[str, Any], columns: Iterable[str], *, nullable: Iterable[str] = ()) -> list[str]:
    """Each of ``columns`` that is not text (or NULL where ``nullable`` allows), as ``actor is a BLOB``."""
    may_be_null = set(nullable)
    found = []
    for column in columns:
        value = row[column]
        if isinstance(value, str) or (value is None and column in may_be_null):
            continue
        found.append(f"{column} is {_sqlite_type(value)}, not text")
    return found


def require_text(row: Mapping[str, Any], event_id: Any, columns: Iterable[str], *,
                 nullable: Iterable[str] = ()) -> None:
    """Raise ``AuditLogCorrupt`` naming the event when a column is not what an append writes."""
    wrong = wrong_types(row, columns, nullable=nullable)
    if wrong:
        raise AuditLogCorrupt(f"event #{event_id} cannot be read: {'; '.join(wrong)} (no append writes that: "
                              "the log was edited outside proofbot)",
                              hint="run `proofbot audit verify` on this database to see what else changed")


def _sqlite_type(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return "a BLOB"
    if isinstance(value, int):
        return "an INTEGER"
    if isinstance(value, float):
        return "a REAL"
    return f"a {type(value).__name__}"
