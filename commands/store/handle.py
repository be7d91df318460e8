"""The database handle every store function is given (``store.write``/``snapshot``): the one interface both backends
provide, lite.py's ``LiteDatabase`` on SQLite and pg.py's ``PgDatabase`` on PostgreSQL; mypy checks each against it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable


class Table(Protocol):
    """``db.table(name)``: insert a dict row (a dict, list or tuple value stored as JSON text), delete by key."""

    @property
    def last_rowid(self) -> int | None: ...

    def insert(self, row: dict[str, Any]) -> Table: ...

    def delete(self, key: Any) -> Table: ...


class Db(Protocol):
    """One connection inside the transaction the store opened: SQL with ``?`` placeholders on either backend."""

    @property
    def dialect(self) -> str: ...  # "sqlite" or "postgresql"

    @property
    def conn(self) -> Any: ...  # the driver's own connection (sqlite3 or psycopg): tests and the bench only

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any: ...

    def query(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]: ...

    def table(self, name: str) -> Table: ...


@runtime_checkable
class Streaming(Db, Protocol):
    """A backend whose ``query`` holds every row at once, with ``iterate`` to stream a long read (PostgreSQL)."""

    def iterate(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]: ...
