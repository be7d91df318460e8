"""The audit store on SQLite with the stdlib ``sqlite3`` alone: the part of sqlite-utils' ``Database`` the store's SQL
uses (``query``, ``execute``, ``table(name).insert/delete``, ``conn``), as pg.py gives it on PostgreSQL, so a verify
never loads sqlite-utils and its click, pluggy and dateutil (~50 ms of CPU per cold process); and the one place a
SQLite error that is the file's or the disk's, not the SQL's, becomes ``CouldNotRecord``.

tests/test_store_lite.py writes the same operation through sqlite-utils and through this, and compares the rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from commands.errors import CouldNotRecord


def _keys(description: Sequence[Sequence[Any]]) -> list[str]:
    """Column names, a repeated one renamed ``name_2``, ``name_3``… (as sqlite-utils' ``dedupe_keys``)."""
    keys = [str(column[0]) for column in description]
    taken = set(keys)
    if len(taken) == len(keys):
        return keys
    seen: set[str] = set()
    for index, key in enumerate(keys):
        new, suffix = key, 2
        if key in seen:
            while new in seen or new in taken:
                new, suffix = f"{key}_{suffix}", suffix + 1
        keys[index] = new
        seen.add(new)
    return keys


def _stored(value: Any) -> Any:
    """A value as sqlite-utils' ``insert`` stores it: a dict, list or tuple as JSON text, the rest as it is."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=repr, ensure_ascii=False)
    return value


class LiteTable:
    """``db.table(name)``: insert a dict row, delete by primary key (the subset the store uses)."""

    def __init__(self, db: LiteDatabase, name: str) -> None:
        self.db, self.name = db, name
        self.last_rowid: int | None = None

    def insert(self, row: dict[str, Any]) -> LiteTable:
        columns = ", ".join(f"[{column}]" for column in row)
        cursor = self.db.execute(f"INSERT INTO [{self.name}] ({columns}) VALUES ({', '.join('?' * len(row))})",
                                 [_stored(value) for value in row.values()])
        self.last_rowid = cursor.lastrowid
        return self

    def delete(self, key: Any) -> LiteTable:
        column = "host" if self.name == "locks" else "id"  # as pg.py's PRIMARY_KEYS
        self.db.execute(f"DELETE FROM [{self.name}] WHERE [{column}] = ?", [key])
        return self


class LiteDatabase:
    """One SQLite connection (autocommit: the store opens and ends every transaction itself)."""

    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.execute("PRAGMA recursive_triggers=on")  # as sqlite-utils' Database sets it: the same triggers fire

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> sqlite3.Cursor:
        return self.conn.execute(sql) if params is None else self.conn.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]:
        """Dict rows. A SELECT streams (the chain walk reads millions); a write with RETURNING is read whole at
        once, so it has finished when the transaction commits."""
        cursor = self.execute(sql, params)
        if cursor.description is None:
            raise ValueError("query() can only be used with SQL that returns rows - use execute() for other "
                             "statements")
        keys = _keys(cursor.description)
        rows = cursor if sql.lstrip()[:6].upper() == "SELECT" else cursor.fetchall()
        return (dict(zip(keys, row, strict=True)) for row in rows)

    def table(self, name: str) -> LiteTable:
        return LiteTable(self, name)


# SQLite's primary result codes (sqlite3 errors carry them as ``sqlite_errorcode``, low byte) that say the file or
# its disk did not take the work, not that the SQL was wrong: busy and locked past the timeout, out of memory, read
# only, an I/O error, corrupt, full, cannot open, a locking protocol error, not a database.
_NOT_TAKEN = {5: "locked", 6: "locked", 7: "memory", 8: "readonly", 10: "io", 11: "corrupt", 13: "full",
              14: "io", 15: "locked", 26: "corrupt"}
_WHAT_TO_DO = {
    "locked": "another process held the database's write lock for longer than the 10 s timeout: find it "
              "(`fuser {path}`) and let it finish, then verify the host",
    "memory": "the machine is out of memory: free some, then verify the host",
    "readonly": "make {path}, its folder and its -wal and -shm files writable by the user proofbot runs as, "
                "then verify the host",
    "io": "check the disk or filesystem that holds {path} (dmesg names the error), then verify the host",
    "corrupt": "run `proofbot audit verify --db {path}` to see what is damaged; restore the file from a copy if "
               "need be, then verify the host",
    "full": "free space on the filesystem that holds {path} (df -h), then verify the host",
}


def not_taken(exc: sqlite3.Error) -> str | None:
    """Which of the causes above stopped the work, or None: an error of the SQL itself (a bug, a trigger's
    ABORT on an edited log) is not one, and stays what it is."""
    code = getattr(exc, "sqlite_errorcode", None)
    return _NOT_TAKEN.get(code & 0xFF) if isinstance(code, int) else None


def could_not_record(where: str, why: str, committing: bool, hint: str | None = None) -> CouldNotRecord:
    """The one message of a write (or a read) the audit database did not take, on either backend."""
    what = ("the write was cut off while it committed: it may or may not be in the log" if committing
            else "nothing of it was written")
    return CouldNotRecord(f"could not record in the audit database {where}: {why}; {what}",
                          hint=hint or "the audit log holds every step up to the last one recorded; proofbot "
                                       "reconnects by itself when the database is back: then verify the host")


def sqlite_could_not_record(path: Path | str, exc: sqlite3.Error, cause: str, committing: bool, *,
                            opening: bool = False) -> CouldNotRecord:
    """``could_not_record`` for SQLite, its hint saying what to do about this cause; ``opening``: the store did
    not open (nothing was done yet)."""
    why = str(exc) or type(exc).__name__
    if opening:
        return CouldNotRecord(f"cannot open audit database {path}: {why}",
                              hint=f"nothing was done; {_WHAT_TO_DO[cause].format(path=path)}")
    # A COMMIT SQLite refused wrote no commit frame (atomic commit): only an I/O error while it synced the
    # write-ahead log may leave one that the next open replays.
    return could_not_record(str(path), why, committing and cause in ("io", "corrupt"), "the audit log holds every "
                            f"step up to the last one recorded; {_WHAT_TO_DO[cause].format(path=path)}")
