"""``proofbot audit export --sqlite FILE``: a PostgreSQL log copied into a SQLite file that the real Datasette and
``audit verify --db FILE`` read, verifying as the source does (a truncated source shows truncated in the copy);
an existing FILE is refused unless --force; a copy that fails leaves neither FILE nor a temp file."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from commands.store import export
from commands.store.chain import verify_chain
from commands.store.db import AuditStore
from tests.audit_events import cli_origin, record_operation, slack_origin
from tests.conftest import CliRun, run_cli
from tests.store_sql import raw


async def fill(url: str) -> None:
    store = AuditStore.open(url)
    await record_operation(store, "op-1", origin=cli_origin(), verdict="fail")
    await record_operation(store, "op-2", operation="restore", origin=slack_origin("U0ALICE", "C0OPS", "200.000100"),
                           decision="approved", decided_by="slack:U0BOB")
    store.close()


async def cli(*args: str) -> CliRun:
    return await run_cli("audit", *args, env={"PROOFBOT_DB": ""})


async def datasette_rows(db: Path, table: str) -> list[dict[str, Any]]:
    datasette = shutil.which("datasette", path=str(Path(sys.executable).parent))
    assert datasette is not None, "datasette is a dev dependency"
    child = await asyncio.create_subprocess_exec(datasette, "serve", str(db), "--get",
                                                 f"/{db.stem}/{table}.json?_shape=array",
                                                 stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(120):
        out, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


async def test_a_postgresql_log_exports_to_sqlite_that_datasette_and_verify_read(pg_url: str, tmp_path: Path) -> None:
    await fill(pg_url)
    copy = tmp_path / "audit.db"
    run = await cli("export", "--db", pg_url, "--sqlite", str(copy))
    assert run.code == 0, run.stdout + run.stderr
    assert f"17 events written to {copy}" in run.stdout
    assert os.listdir(tmp_path) == ["audit.db"]  # one whole file, no temp or -wal beside it
    store = AuditStore.open(pg_url)
    source = await verify_chain(store)
    store.close()
    exported = await cli("verify", "--db", str(copy), "--json")
    assert exported.code == 0, exported.stdout + exported.stderr
    assert json.loads(exported.stdout)["head"] == {"event_id": source.head_id, "hash": source.head_hash}
    assert json.loads(exported.stdout)["intact"] is True and source.intact
    operations = await datasette_rows(copy, "operations")
    assert [(o["operation_id"], o["verdict"], o["approval"]) for o in operations] == [
        ("op-1", "fail", "no approval needed"), ("op-2", "pass", "approved by slack:U0BOB")]


async def test_an_existing_file_is_refused_unless_forced(pg_url: str, tmp_path: Path) -> None:
    await fill(pg_url)
    copy = tmp_path / "audit.db"
    copy.write_text("keep me")
    run = await cli("export", "--db", pg_url, "--sqlite", str(copy))
    assert run.code == 2 and "exists" in run.stderr and "--force" in run.stderr
    assert copy.read_text() == "keep me"
    forced = await cli("export", "--db", pg_url, "--sqlite", str(copy), "--force")
    assert forced.code == 0, forced.stderr
    assert (await cli("verify", "--db", str(copy))).code == 0


async def test_a_truncated_source_exports_as_truncated(pg_url: str, tmp_path: Path) -> None:
    await fill(pg_url)
    conn = raw(pg_url)
    conn.execute("ALTER TABLE events DISABLE TRIGGER events_are_append_only_delete")
    conn.execute("DELETE FROM events WHERE id > 12")
    conn.execute("ALTER TABLE events ENABLE TRIGGER events_are_append_only_delete")
    conn.close()
    store = AuditStore.open(pg_url)
    source = await verify_chain(store)
    copy = await export.export_sqlite(store, tmp_path / "audit.db")
    store.close()
    assert source.broken is not None and source.broken.problem == "truncated"
    run = await cli("verify", "--db", str(copy.path), "--json")
    assert run.code == 1
    assert json.loads(run.stdout)["broken"] == {"event_id": 13, "problem": "truncated",
                                               "detail": source.broken.detail}


async def test_a_copy_that_fails_leaves_nothing(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await fill(pg_url)
    monkeypatch.setattr(export, "BATCH", 5)
    real_copy = export._copy
    calls = 0

    def failing_query(db: Any, target: Any) -> Any:
        class Failing:
            def query(self, sql: str, params: Any = None) -> Any:
                nonlocal calls
                calls += 1
                if calls == 3:  # two batches written, then the source fails
                    raise OSError("connection lost")
                return db.query(sql, params)

        return real_copy(Failing(), target)

    monkeypatch.setattr(export, "_copy", failing_query)
    store = AuditStore.open(pg_url)
    with pytest.raises(OSError, match="connection lost"):
        await export.export_sqlite(store, tmp_path / "audit.db")
    store.close()
    assert calls == 3 and os.listdir(tmp_path) == []
