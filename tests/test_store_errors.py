"""Tier 1: a SQLite error of the file, not of the SQL, is CouldNotRecord at the store's boundary (exit 3), said once
with what to do; the operation it stopped writes nothing more, and says that first cause each time it tries."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import commands.store.db
from commands.errors import CouldNotRecord, UsageError
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.lite import not_taken
from commands.store.log import audit_log
from commands.vocabulary import EventKind, Operation


async def test_a_write_locked_out_past_the_timeout_is_could_not_record_and_stops_its_operation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands.store.db, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "audit.db"
    store = AuditStore.open(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        log = audit_log(store, Operation.VERIFY, "op-1", "ct129", "root")
        await log.requested(Origin("root", "cli"))
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock, and keeps it
        with pytest.raises(CouldNotRecord) as failed:
            await log.step("ready")
        assert failed.value.exit_code == 3
        assert failed.value.message == (f"could not record in the audit database {path}: database is locked; "
                                        "nothing of it was written")
        assert "held the database's write lock for longer than" in failed.value.hint
        other.execute("ROLLBACK")  # the database takes writes again: this operation still writes nothing more
        with pytest.raises(CouldNotRecord, match="already failed to record a step") as again:
            await log.interrupted("on the way out")
        assert "database is locked" in again.value.message and again.value.hint == failed.value.hint
        await audit_log(store, Operation.VERIFY, "op-2", "ct129", "root").requested(Origin("root", "cli"))
        kinds = await store.read(lambda conn: conn.execute("SELECT kind, operation_id FROM events").fetchall())
        assert kinds == [(EventKind.REQUESTED, "op-1"), (EventKind.REQUESTED, "op-2")]
    finally:
        other.close()
        store.close()


async def test_an_error_of_the_sql_itself_stays_what_it_is(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        await audit_log(store, Operation.VERIFY, "op-1", "ct129", "root").requested(Origin("root", "cli"))
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):  # an edit of the log: not a full disk
            await store.write(lambda db: db.execute("DELETE FROM events"))
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await store.snapshot(lambda db: list(db.query("SELECT * FROM nothing_here")))
    finally:
        store.close()


@pytest.mark.parametrize(("code", "cause"), [
    (sqlite3.SQLITE_BUSY, "locked"), (sqlite3.SQLITE_LOCKED, "locked"), (sqlite3.SQLITE_READONLY, "readonly"),
    (sqlite3.SQLITE_IOERR, "io"), (sqlite3.SQLITE_IOERR | (4 << 8), "io"), (sqlite3.SQLITE_FULL, "full"),
    (sqlite3.SQLITE_CORRUPT, "corrupt"), (sqlite3.SQLITE_NOTADB, "corrupt"), (sqlite3.SQLITE_CANTOPEN, "io"),
    (sqlite3.SQLITE_ERROR, None), (sqlite3.SQLITE_CONSTRAINT, None), (sqlite3.SQLITE_MISMATCH, None)])
def test_which_sqlite_result_codes_are_the_file_not_the_sql(code: int, cause: str | None) -> None:
    error = sqlite3.OperationalError("x")
    error.sqlite_errorcode = code
    assert not_taken(error) == cause
    assert not_taken(sqlite3.OperationalError("no code")) is None


async def test_a_database_locked_past_the_timeout_while_opening_is_could_not_record_and_a_wrong_file_is_usage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands.store.db, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "audit.db"
    other = sqlite3.connect(path, isolation_level=None)  # a rollback-journal file another process holds whole
    try:
        other.execute("CREATE TABLE t (x)")
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(CouldNotRecord) as failed:
            AuditStore.open(path)
        assert failed.value.message == f"cannot open audit database {path}: database is locked"
        assert failed.value.hint.startswith("nothing was done; another process held the database's write lock")
    finally:
        other.close()
    wrong = tmp_path / "inventory.yml"
    wrong.write_text("hosts: {}\n" * 200)
    with pytest.raises(UsageError, match="file is not a database") as refused:
        AuditStore.open(wrong)
    assert refused.value.exit_code == 2 and refused.value.hint == "pass --db PATH"
