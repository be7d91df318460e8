"""The store tests' backends: ``store_target`` is a fresh SQLite file, then a fresh PostgreSQL schema, so a
store test written once runs on both. One PostgreSQL cluster per session (tests/lab/postgres.py), one
database per test module (CREATE DATABASE … TEMPLATE template0), one schema per test (cheap: no files)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.lab import skip_or_fail
from tests.lab.postgres import Cluster, private_cluster
from tests.store_sql import close_opened

BACKENDS = ["sqlite", "postgresql"]
_schemas = itertools.count(1)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """The session's PostgreSQL 15; where labs are required (CI) one that will not start fails the run."""
    with private_cluster(skip_or_fail, Cluster) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def pg_database(pg_cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """A fresh database for this test module; its URL."""
    return pg_cluster.database("m_" + re.sub(r"\W", "_", request.module.__name__.rsplit(".", 1)[-1])[:50])


def pg_schema_url(cluster: Cluster, database_url: str) -> str:
    """A fresh, empty schema in the module's database, as a URL whose connections use it (search_path)."""
    import psycopg

    schema = f"t{next(_schemas)}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{database_url}&options={quote(f'-c search_path={schema}')}"


@pytest.fixture(params=BACKENDS)
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """Where a test's audit store lives: a SQLite path, or a PostgreSQL URL (a schema of its own). The plain
    connections the test opened on it (tests/store_sql.py) are closed after it."""
    if request.param == "sqlite":
        yield tmp_path / "a.db"
    else:
        yield pg_schema_url(request.getfixturevalue("pg_cluster"), request.getfixturevalue("pg_database"))
    close_opened()


@pytest.fixture
def pg_url(pg_cluster: Cluster, pg_database: str) -> str:
    """A fresh PostgreSQL schema of this test's own, as a URL."""
    return pg_schema_url(pg_cluster, pg_database)
