"""The store on PostgreSQL: a URL picks it, two processes appending at once keep one chain, `audit verify` walks
it with the same function and names what a superuser changed, and a server that cannot be reached is a clear
error that shows no password."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commands.errors import CouldNotRecord, UsageError
from commands.store import pg
from commands.store.chain import verify_chain
from commands.store.db import AuditStore, db_path, db_target
from commands.store.pg_schema import pg_expected
from commands.store.schema import expected_schema
from tests.audit_events import cli_origin, raw_append, record_operation
from tests.conftest import REPO, run_cli
from tests.lab import REQUIRE_ENV, UNAVAILABLE_ENV
from tests.lab.postgres import Cluster
from tests.store_sql import raw, rows

APPENDER = """
import asyncio, sys
from commands.store.db import AuditStore
from tests.audit_events import raw_append

async def main() -> None:
    store = AuditStore.open(sys.argv[1])
    for n in range(int(sys.argv[2])):
        await raw_append(store, "check", actor=sys.argv[3], details={"n": n})
    store.close()

asyncio.run(main())
"""
PER_PROCESS = 150


def test_a_url_picks_postgresql_and_a_path_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROOFBOT_DB", raising=False)
    assert db_target("postgresql://bot@db.internal/proofbot") == "postgresql://bot@db.internal/proofbot"
    assert db_target("postgres://bot@db/proofbot") == "postgres://bot@db/proofbot"
    assert db_target("audit.db") == Path("audit.db")
    monkeypatch.setenv("PROOFBOT_DB", "postgresql://bot@/proofbot")
    assert db_target(None) == "postgresql://bot@/proofbot"
    with pytest.raises(UsageError, match="SQLite file only"):
        db_path(None)  # serve --check reads the SQLite file's lock; replicas on PostgreSQL hold leases


async def test_two_processes_appending_at_once_keep_one_chain(pg_url: str) -> None:
    AuditStore.open(pg_url).close()  # migrated once, so both children race on appends only
    children = [await asyncio.create_subprocess_exec(sys.executable, "-c", APPENDER, pg_url, str(PER_PROCESS), actor,
                                                     cwd=Path(__file__).parent.parent) for actor in ("a", "b")]
    async with asyncio.timeout(120):
        codes = [await child.wait() for child in children]
    assert codes == [0, 0]
    store = AuditStore.open(pg_url)
    report = await verify_chain(store)
    store.close()
    assert report.intact, report
    assert report.events == report.head_id == 2 * PER_PROCESS
    conn = raw(pg_url)
    actors = [row[0] for row in conn.all("SELECT actor FROM events ORDER BY id")]
    conn.close()
    assert sorted(set(actors)) == ["a", "b"]
    assert any(actors[i] != actors[i + 1] for i in range(len(actors) - 1))  # they did interleave


async def test_postgresql_has_the_same_schema_and_verify_names_changes(pg_url: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg, "STREAM_ROWS", 3)  # the chain streamed in several fetches, queries in between
    store = AuditStore.open(pg_url)
    await record_operation(store, "op-1", origin=cli_origin(), verdict="fail")
    report = await verify_chain(store)
    assert report.intact and report.schema_differences == () and report.events == 8
    assert set(pg_expected()) == {name for name, thing in expected_schema().items()
                                  if thing.sql or thing.type == "trigger"}
    conn = raw(pg_url)
    conn.execute("ALTER TABLE events DISABLE TRIGGER events_are_append_only_update")
    conn.execute("UPDATE events SET actor = 'mallory' WHERE id = 3")
    conn.execute("CREATE INDEX quiet ON events(actor)")
    conn.close()
    report = await verify_chain(store)
    store.close()
    assert report.broken is not None and (report.broken.event_id, report.broken.problem) == (3, "edited")
    assert report.missing_guards == ("events_are_append_only_update",)
    assert {(d.name, d.change) for d in report.schema_differences} == {
        ("quiet", "added (on events)"), ("events_are_append_only_update", "missing (on events)")}


async def test_a_store_carries_on_after_postgresql_restarts(pg_url: str, pg_cluster: Cluster) -> None:
    store = AuditStore.open(pg_url)
    try:
        await raw_append(store, "bot-started")
        await asyncio.to_thread(pg_cluster.restart)  # the pooled connection is cut
        await raw_append(store, "check", details={"after": "restart"})  # a fresh connection, the same chain
        report = await verify_chain(store)
    finally:
        store.close()
    assert report.intact and report.events == 2


async def test_reading_a_database_without_a_log_is_refused_and_creates_nothing(pg_url: str) -> None:
    run = await run_cli("audit", "verify", "--db", pg_url)
    assert run.code == 2 and "no audit log in the PostgreSQL database" in run.stderr, run.stdout + run.stderr
    conn = raw(pg_url)
    assert conn.all("SELECT to_regclass('schema_migrations') IS NULL") == [(True,)]
    conn.close()


async def test_every_table_and_view_has_the_same_columns_on_both(pg_url: str, tmp_path: Path) -> None:
    """The parity a new SQLite migration must keep: pg_migrations.py gives PostgreSQL its tables and ALTERs by
    hand (views and indexes follow by themselves), so a table or column added on one side only shows here."""
    AuditStore.open(tmp_path / "a.db").close()
    AuditStore.open(pg_url).close()
    names = sorted(name for name, thing in expected_schema().items() if thing.type in ("table", "view"))
    sqlite_columns = {(name, column) for name in names
                      for (column,) in rows(tmp_path / "a.db", f"SELECT name FROM pragma_table_info('{name}')")}
    pg_columns = set(rows(pg_url, "SELECT table_name, column_name FROM information_schema.columns "
                                  "WHERE table_schema = current_schema()"))
    assert pg_columns == sqlite_columns
    assert {name for name, _ in sqlite_columns} == set(names) and len(sqlite_columns) > 60


def test_a_server_that_cannot_be_reached_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://bot:s3cret@/proofbot?host={tmp_path}&connect_timeout=2"
    with pytest.raises(CouldNotRecord) as refused:  # exit 3, as a host that cannot be reached
        AuditStore.open(url)
    assert "cannot open audit database" in refused.value.message and "s3cret" not in refused.value.message
    assert str(tmp_path) in refused.value.message  # where it looked (the socket's folder)


NEEDS_POSTGRES = """
from tests.store_backends import pg_cluster, pg_database, pg_url  # noqa: F401


def test_needs_postgres(pg_url: str) -> None:
    assert pg_url
"""


def test_a_postgresql_that_cannot_run_fails_where_labs_are_required(tmp_path: Path) -> None:
    """(Where they are not, it skips with the same reason: tests/lab skip_or_fail, as every tier.)"""
    test_file = tmp_path / "test_needs_postgres.py"
    test_file.write_text(NEEDS_POSTGRES)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", REQUIRE_ENV, UNAVAILABLE_ENV)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-ra", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(REPO), str(test_file)],
        cwd=REPO, env={**clean, UNAVAILABLE_ENV: "postgres", REQUIRE_ENV: "1"}, capture_output=True, text=True,
        timeout=120)
    assert run.returncode == 1 and "1 error" in run.stdout and "skipped" not in run.stdout, run.stdout + run.stderr
    assert f"PostgreSQL lab made unavailable by {UNAVAILABLE_ENV}" in run.stdout
