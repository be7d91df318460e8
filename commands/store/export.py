"""``audit export --sqlite FILE``: the audit log copied into a new SQLite file that Datasette and ``audit verify
--db FILE`` read (Datasette does not speak PostgreSQL), from either backend.

The copy is one read snapshot of the source: every event with its id, hashes and stored text unchanged, and the
chain head as the source records it (so a truncated source verifies as truncated in the copy too); the views
come with the file's own migrations. Locks and plans are the live state of a running bot, not the log: left out.
Written to a temp file beside FILE and renamed onto it, so FILE is whole or absent; an existing FILE is
refused unless replacing it was asked for.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from commands.errors import UsageError
from commands.store.chain import guard_trigger_sql
from commands.store.db import AuditStore

if TYPE_CHECKING:
    from commands.store.handle import Db

COLUMNS = ("id", "at", "operation_id", "operation", "host", "kind", "actor", "details", "prev_hash", "hash")
BATCH = 2000  # events read and written at a time: memory stays bounded however long the log


@dataclass(frozen=True)
class Exported:
    path: Path
    events: int
    head_id: int | None


async def export_sqlite(source: AuditStore, path: Path, *, replace: bool = False) -> Exported:
    temp, target = await asyncio.to_thread(_prepare, path, replace)
    try:
        count, head_id = await source.snapshot(lambda db: _copy(db, target))
        await asyncio.to_thread(_finish, target, temp, path)
    except BaseException:
        _discard(target, temp)
        raise
    return Exported(path, count, head_id)


def _prepare(path: Path, replace: bool) -> tuple[Path, sqlite3.Connection]:
    """A temp file beside ``path`` with the SQLite schema (its own migrations), in an open write transaction."""
    if path.exists() and not replace:
        raise UsageError(f"{path} exists", hint="pass --force to replace it, or name a new file")
    if not path.parent.is_dir():
        raise UsageError(f"folder {path.parent} does not exist", hint="name a file in an existing folder")
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    temp = Path(temp_name)
    target = None
    try:
        AuditStore.open(temp).close()  # the schema, views and guards, by the SQLite migrations
        target = sqlite3.connect(temp, isolation_level=None, check_same_thread=False)
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        target.execute("BEGIN IMMEDIATE")
    except BaseException:
        _discard(target, temp)
        raise
    return temp, target


def _finish(target: sqlite3.Connection, temp: Path, path: Path) -> None:
    target.execute("COMMIT")
    target.close()
    with open(temp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(temp, path)


def _discard(target: sqlite3.Connection | None, temp: Path) -> None:
    if target is not None:
        target.close()
    with suppress(OSError):
        temp.unlink()


def _copy(db: Db, target: sqlite3.Connection) -> tuple[int, int | None]:
    """Every event, in id order and in batches, then the source's chain head (all in the caller's snapshot)."""
    marks = ", ".join("?" for _ in COLUMNS)
    insert = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({marks})"
    count, last = 0, None
    while True:
        batch = list(db.query(f"SELECT {', '.join(COLUMNS)} FROM events WHERE id > ? ORDER BY id LIMIT {BATCH}",
                              [last if last is not None else -1]))
        if not batch:
            break
        target.executemany(insert, [tuple(row[column] for column in COLUMNS) for row in batch])
        count, last = count + len(batch), int(batch[-1]["id"])
    head = next(db.query("SELECT event_id, hash, events, at FROM chain_head WHERE id = 1"), None)
    if head is not None:
        # The head as the source records it, even where it does not follow the copied rows: the copy must
        # verify as the source does. Its guard is set aside for this one write and put back exactly.
        guard = guard_trigger_sql()["chain_head_follows_appends"]
        target.execute("DROP TRIGGER chain_head_follows_appends")
        target.execute("UPDATE chain_head SET event_id = ?, hash = ?, events = ?, at = ? WHERE id = 1",
                       [head["event_id"], head["hash"], head["events"], head["at"]])
        target.execute(guard)
    return count, last
