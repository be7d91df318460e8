"""Tier 1: the store on the stdlib sqlite3 (commands/store/lite.py) writes what it wrote through sqlite-utils: the same
operation written both ways gives the same rows, byte for byte, and the same chain; and what lite.py copies of
sqlite-utils (its column names, its row values) agrees with sqlite-utils on many cases."""

from __future__ import annotations

import itertools
import json
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from sqlite_utils.utils import dedupe_keys

import commands.store.events
import commands.store.migrations
from commands.clock import utc_at
from commands.findings import Evidence, Finding
from commands.store import approvals, locks
from commands.store.chain import verify_chain
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.lite import LiteDatabase, _keys
from commands.store.locks import LockHolder
from commands.store.log import audit_log
from commands.vocabulary import CheckStatus, Operation, Verdict
from tests.audit_events import cli_origin


def open_with_sqlite_utils(path: Path) -> AuditStore:
    """The store as it was opened before lite.py: sqlite-utils' Database over the same connection settings."""
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=10)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return AuditStore._opened(AuditStore(sqlite_utils.Database(conn), path=path))  # type: ignore[arg-type]


async def one_operation(store: AuditStore) -> None:
    """A verify's events (a batch of checks in one transaction), a lock taken, renewed and freed, a plan made."""
    log = audit_log(store, Operation.VERIFY, "op-1", "ct129", "root@ops1")
    await log.requested(cli_origin(), checks=["health", "main-pid"], note={"ünïcode": "ok", "n": 1.5})
    await log.checks([Finding("health", CheckStatus.PASS, "health 200", Evidence("curl -s x", 0, "ok\n", 0.01)),
                      Finding("main-pid", CheckStatus.FAIL, "no pid", Evidence("systemctl show", 3, "", 0.02))])
    await log.step("ready", ready_after_s=1.25, hosts=["a", "b"])
    lock = await locks.acquire(store, "ct129", "op-1", Operation.VERIFY, "root@ops1")
    await store.write(lambda db: db.table("locks").insert(asdict(LockHolder(
        "ct130", "op-2", "restore", "bob", 1, "m", "2026-01-01T00:00:00.000Z", lease_expires=1.5))))
    await locks.release(store, lock)
    await approvals.create(store, plan_id="plan-1", operation=Operation.RESTORE, host="ct129",
                           requested_by="root@ops1", plan_hash="abc", details={"files": ["a", "b"], "n": None},
                           approvals=approvals.Approvals())
    await log.finished(Finished(Verdict.FAIL, duration_s=1.5, statuses={"health": CheckStatus.PASS}))


def every_row(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")]
        rows = {table: conn.execute(f"SELECT * FROM [{table}] ORDER BY rowid").fetchall() for table in tables}
        rows["sqlite_master"] = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")\
            .fetchall()
    conn.close()
    return rows


async def test_the_same_operation_written_through_sqlite_utils_and_sqlite3_gives_the_same_rows_and_chain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approvals.time, "time", lambda: 1_780_000_000.0)
    for module in (locks, approvals):
        monkeypatch.setattr(module, "lease_until", lambda: 1_780_000_060.0)
    found: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
    heads = {}
    for way, opener in (("sqlite-utils", open_with_sqlite_utils), ("sqlite3", AuditStore.open)):
        path = tmp_path / f"{way}.db"
        frozen_clock_restart(monkeypatch)
        store = opener(path)
        try:
            assert isinstance(store._sqlite, sqlite_utils.Database if way == "sqlite-utils" else LiteDatabase)
            await one_operation(store)
            report = await verify_chain(store)
            assert report.intact, report
            heads[way] = (report.events, report.head_hash)
        finally:
            store.close()
        found[way] = every_row(path)
    assert heads["sqlite3"] == heads["sqlite-utils"]
    assert found["sqlite3"]["events"] and found["sqlite3"]["plans"] and found["sqlite3"]["locks"]
    for table, rows in found["sqlite-utils"].items():
        assert found["sqlite3"][table] == rows, table
    assert found["sqlite3"].keys() == found["sqlite-utils"].keys()


def frozen_clock_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each write's time a fixed sequence, so two stores written one after the other can be compared."""
    ticks = itertools.count()
    for module in (commands.store.events, commands.store.migrations, approvals, locks):
        monkeypatch.setattr(module, "utc_now", lambda: utc_at(1_780_000_000 + next(ticks) / 1000))


@pytest.mark.parametrize("names", [["a"], ["a", "b"], ["a", "a"], ["a", "a", "a"], ["a", "a", "a_2"],
                                   ["id", "x", "id", "id", "id_3"], ["a_2", "a", "a"], ["", ""]])
def test_repeated_column_names_are_renamed_as_sqlite_utils_renames_them(names: list[str]) -> None:
    assert _keys([(name,) for name in names]) == dedupe_keys(names)


@pytest.mark.parametrize("value", [None, 1, 1.5, "text", "ünï", b"\x00\xff", {"a": [1, "é"]}, [1, 2], (1, "x"),
                                   Verdict.PASS, True, {"nested": {"a": None}}])
def test_a_value_is_stored_as_sqlite_utils_inserts_it(tmp_path: Path, value: Any) -> None:
    stored = []
    for way in ("utils", "lite"):
        conn = sqlite3.connect(tmp_path / f"{way}.db", isolation_level=None)
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v)")
        db: Any = sqlite_utils.Database(conn) if way == "utils" else LiteDatabase(conn)
        db.table("t").insert({"id": 1, "v": value})
        stored.append(conn.execute("SELECT v, typeof(v) FROM t").fetchall())
        conn.close()
    assert stored[0] == stored[1]


def test_a_write_with_returning_is_done_when_read_and_a_select_streams(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    db = LiteDatabase(conn)
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.execute("BEGIN IMMEDIATE")
    for n in range(3):
        db.table("t").insert({"id": n, "v": json.dumps(n)})
    rows = db.query("UPDATE t SET v = 'x' RETURNING id")  # not read yet: the COMMIT must still succeed
    conn.execute("COMMIT")
    assert sorted(row["id"] for row in rows) == [0, 1, 2]
    assert next(db.query("SELECT v, v FROM t ORDER BY id")) == {"v": "x", "v_2": "x"}
    with pytest.raises(ValueError, match="use execute"):
        db.query("DELETE FROM t WHERE id = 0")
    conn.close()
