"""The Datasette metadata shipped with the package describes real tables and columns, and every
canned query runs on a real audit database and answers what its title says: in SQLite, and in a real
Datasette serving the demo's database (proofbot-demo.db) on loopback."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import yaml

import commands.store
from commands.store.db import AuditStore
from tests.audit_events import raw_append
from tests.conftest import REPO

METADATA = Path(commands.store.__file__).with_name("datasette-metadata.yml")
FIXTURE = REPO / "tests" / "recorded" / "audit_v4_demo.db"  # written by `proofbot demo`


async def upgraded(tmp_path: Path) -> Path:
    path = tmp_path / "audit.db"
    shutil.copyfile(FIXTURE, path)
    AuditStore.open(path).close()
    return path


async def test_every_described_column_exists_and_every_query_runs(tmp_path: Path) -> None:
    database = yaml.safe_load(METADATA.read_text())["databases"]["proofbot"]
    path = await upgraded(tmp_path)
    with closing(sqlite3.connect(path)) as conn:
        for table, spec in database["tables"].items():
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            assert columns, f"{table} does not exist"
            assert set(spec.get("columns", {})) <= columns, table
        answers = {name: conn.execute(query["sql"], {"actor": "slack:UAPPROVER"}).fetchall()
                   for name, query in database["queries"].items()}
    assert [row[0] for row in answers["last_verify_per_host"]] == ["ct129"]
    assert answers["last_verify_per_host"][0][2] == "pass"  # the demo's final verify
    assert answers["awaiting_approval"] == []
    assert {row[1] for row in answers["approved_by"]} == {"restore", "restart"}


async def test_the_metadata_file_is_in_the_installed_package() -> None:
    assert "commands.store" in (REPO / "pyproject.toml").read_text() and METADATA.is_file()


PLUGINS = Path(commands.store.__file__).with_name("datasette_plugin")


async def with_every_ending(tmp_path: Path, name: str) -> Path:
    """The demo's log (upgraded) under ``name``, plus an operation for each way one ends without a
    finished verdict of its own, and one still running."""
    path = tmp_path / name
    shutil.copyfile(FIXTURE, path)
    store = AuditStore.open(path)
    try:
        for operation_id, operation, endings in [
                ("op-refused", "restart", [("refused", "alice@box")]),
                ("op-cancelled", "restore", [("cancelled", "alice@box")]),
                ("op-rejected", "restore", [("rejected", "slack:UBOB")]),
                ("op-expired", "restart", [("expired", "proofbot")]),
                ("op-interrupted", "verify", [("finished", "proofbot")]),
                ("op-running", "verify", [])]:
            await raw_append(store, "requested", operation_id=operation_id, operation=operation, host="ct129",
                               actor="alice@box", details={"origin": {"via": "cli"}})
            for kind, actor in endings:
                await raw_append(store, kind, operation_id=operation_id, operation=operation, host="ct129", actor=actor,
                                   details={"verdict": "interrupted"} if kind == "finished" else {"reason": "test"})
    finally:
        store.close()
    return path


async def test_the_operations_view_tells_each_operation_as_proofbot_audit_does(tmp_path: Path) -> None:
    from bot.words import approval_words
    from commands.store.trail import query_operations

    path = await with_every_ending(tmp_path, "audit.db")
    store = AuditStore.open(path)
    try:
        records = await store.snapshot(lambda db: query_operations(db, "ct129", 200))
    finally:
        store.close()
    with closing(sqlite3.connect(path)) as conn:
        view = {row[0]: row[1:] for row in conn.execute(
            "SELECT operation_id, verdict, finished_at, approval FROM operations WHERE host = 'ct129'")}
    assert len(records) == len(view) > 6
    for record in records:
        verdict = None if record.verdict == "in progress" else record.verdict
        told = (verdict, record.finished_at, approval_words(record, actor=record.decided_by))
        assert view[record.operation_id] == told, record.operation_id
    assert {key: view[key][0] for key in view if not key.startswith("op-2")} == {
        "op-refused": "refused", "op-cancelled": "cancelled", "op-rejected": "rejected", "op-expired": "expired",
        "op-interrupted": "interrupted", "op-running": None}
    assert view["op-refused"][2] == "no approval recorded" and view["op-running"][2] == "no approval needed"


def test_the_metadata_names_every_kind_operation_and_verdict_of_the_vocabulary() -> None:
    from commands.vocabulary import EventKind, Operation, Verdict

    tables = yaml.safe_load(METADATA.read_text())["databases"]["proofbot"]["tables"]

    def named(table: str, column: str) -> set[str]:
        return set(re.findall(r"[a-z][a-z-]*", tables[table]["columns"][column]))

    assert set(EventKind) <= named("events", "kind")
    assert set(Operation) <= named("events", "operation") & named("operations", "operation")
    assert set(Verdict) <= named("operations", "verdict")


def test_the_view_needs_approval_for_exactly_the_mutating_operations() -> None:
    from commands.registry import OPERATIONS
    from commands.store.migrations import MIGRATIONS
    from commands.vocabulary import Operation

    # A rolling restart (`restart GROUP`, audited as operation `rollout`) needs one too (docs/restart.md).
    sql = next(sql for _, sql in reversed(MIGRATIONS) if "CREATE VIEW operations" in sql)  # the latest one
    needing = sorted({spec.name for spec in OPERATIONS if spec.mutating} | {Operation.ROLLOUT})
    assert needing == ["restart", "restore", "rollout"]
    listed = ", ".join(f"'{name}'" for name in needing)
    assert f"WHEN r.operation IN ({listed}) THEN 'no approval recorded'" in sql


async def test_datasette_serves_every_canned_query_on_the_demos_database(tmp_path: Path) -> None:
    path = await with_every_ending(tmp_path, "proofbot-demo.db")
    database = yaml.safe_load(METADATA.read_text())["databases"]["proofbot"]
    async with datasette(path) as base:
        answers = {name: await get_json(f"{base}/proofbot-demo/{name}.json?_shape=array&actor=slack:UAPPROVER")
                   for name in database["queries"]}
        operations = await get_json(f"{base}/proofbot-demo/operations.json?_shape=array&_size=max")
        described = await get_json(f"{base}/-/metadata.json")
    assert [row["host"] for row in answers["last_verify_per_host"]] == ["ct129"]
    assert answers["awaiting_approval"] == []
    assert {row["operation"] for row in answers["approved_by"]} == {"restore", "restart"}
    not_passed = {row["operation_id"]: row["verdict"] for row in answers["not_passed"]}
    assert {key: not_passed.pop(key) for key in list(not_passed) if not key.startswith("op-2")} == {
        "op-refused": "refused", "op-cancelled": "cancelled", "op-rejected": "rejected", "op-expired": "expired",
        "op-interrupted": "interrupted"}
    assert set(not_passed.values()) == {"fail"} and len(not_passed) == 3  # the demo's verifies before the fix
    assert all(row["finished_at"] for row in operations if row["operation_id"] != "op-running")
    assert described["databases"]["proofbot-demo"]["queries"].keys() == database["queries"].keys()


async def get_json(url: str) -> Any:
    def fetch() -> Any:
        with urllib.request.urlopen(url, timeout=30) as response:  # loopback only: the Datasette started here
            assert response.status == 200, url
            return json.loads(response.read())
    return await asyncio.to_thread(fetch)


@asynccontextmanager
async def datasette(path: Path) -> AsyncIterator[str]:
    """A real Datasette on 127.0.0.1 (a port the kernel picks) serving path with the shipped metadata and plugin."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "datasette", "serve", str(path), "--metadata", str(METADATA), "--plugins-dir",
        str(PLUGINS), "--host", "127.0.0.1", "--port", "0", stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert child.stderr is not None
    said: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not (found := re.search(r"running on (http://127\.0\.0\.1:\d+)", "".join(said))):
                line = await child.stderr.readline()
                if not line:
                    raise AssertionError("datasette exited: " + "".join(said)[-2000:])
                said.append(line.decode(errors="replace"))
        drain = asyncio.ensure_future(child.stderr.read())  # keep its log from filling the pipe
        yield found.group(1)
    finally:
        if child.returncode is None:
            child.terminate()
            async with asyncio.timeout(30):
                await child.wait()
        if "drain" in locals():
            await drain


async def test_the_plugin_names_every_served_database_whatever_its_file_is_called(tmp_path: Path) -> None:
    """The hook itself, in this process (the served run above loads it by file path, where coverage cannot
    name it): every database a real Datasette serves gets the shipped section, its internal ones none."""
    from datasette.app import Datasette

    from commands.store.datasette_plugin.proofbot_metadata import get_metadata

    path = await with_every_ending(tmp_path, "proofbot-demo.db")
    served = Datasette([str(path)])
    shipped = yaml.safe_load(METADATA.read_text())
    told = get_metadata(served, None, None, None)
    assert told["title"] == shipped["title"]
    assert told["databases"] == {"proofbot-demo": shipped["databases"]["proofbot"]}
