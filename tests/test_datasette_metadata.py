"""The Datasette metadata shipped with the package describes real tables and columns, and every
canned query runs on a real audit database and answers what its title says."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import yaml

import commands.store
from commands.store.events import AuditStore
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
