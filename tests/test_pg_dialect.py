"""The one place SQLite's SQL becomes PostgreSQL's, held against the real engines: the three SQLite functions
pg_migrations.py defines (json_extract, json_array_length, instr) give what SQLite's give on the same inputs
(differentially, many cases; JSON true and objects are the known, documented differences, and no view reads
them), and pg_sql's translation (placeholders, a literal %, the INDEXED BY hint); a URL's password never shows."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import psycopg
import pytest

from commands.store.pg import pg_sql, redacted_url
from commands.store.pg_migrations import COMPAT_FUNCTIONS

DOCS = [
    {"origin": {"via": "slack", "channel": "C0OPS", "thread_ts": "1.2"}, "verdict": "pass"},
    {"origin": {"via": "cli", "channel": None, "thread_ts": None}},
    {"fleet": {"target": "gpu-west", "hosts": ["ct1", "ct2", "ct3"]}, "fleet_operation_id": "op-9"},
    {"fleet": {"target": "one", "hosts": []}, "reason": "host busy: restore op-1 by slack:U1 since …"},
    {"fleet": {"hosts": "not a list"}, "text": "ct129 now please", "user": "U0ÄLICE", "n": 3, "x": 1.5},
    {"requested_host": "", "nested": {"deeper": {"deepest": "z"}}, "emoji": "✅ done", "quote": "it's \"quoted\""},
    {},
]
PATHS = ["$.verdict", "$.origin.via", "$.origin.channel", "$.origin.thread_ts", "$.fleet.target",
         "$.fleet_operation_id", "$.reason", "$.text", "$.user", "$.requested_host", "$.nested.deeper.deepest",
         "$.emoji", "$.quote", "$.missing", "$.origin.missing", "$.n", "$.x"]
ARRAYS = ["$.fleet.hosts", "$.missing", "$.origin", "$.verdict"]
NEEDLES = [("ct129 now please ", " "), ("", " "), ("abc", "c"), ("abc", "x"), ("ünï cödé", "c")]


@pytest.fixture(scope="module")
def engines(pg_cluster: Any, pg_database: str) -> Any:
    with psycopg.connect(pg_database, autocommit=True) as pg, closing(sqlite3.connect(":memory:")) as lite:
        pg.execute("CREATE SCHEMA IF NOT EXISTS dialect")
        pg.execute("SET search_path = dialect")
        for function in COMPAT_FUNCTIONS:
            pg.execute(function.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION").encode())
        yield pg, lite


def both(engines: Any, sql: str, *params: Any) -> tuple[Any, Any]:
    pg, lite = engines
    [(theirs,)] = pg.execute(pg_sql(sql).encode(), list(params)).fetchall()
    [(ours,)] = lite.execute(sql, params).fetchall()
    return ours, theirs


def test_json_extract_agrees_with_sqlite_on_what_the_views_read(engines: Any) -> None:
    compared = 0
    for doc in DOCS:
        for path in PATHS:
            sqlite_value, pg_value = both(engines, "SELECT json_extract(?, ?)", json.dumps(doc), path)
            # PostgreSQL's is text: a number reads as its digits, as the views' text columns show it
            assert (None if sqlite_value is None else str(sqlite_value)) == pg_value, (doc, path)
            compared += 1
    assert compared == len(DOCS) * len(PATHS)


def test_json_array_length_and_instr_agree_with_sqlite(engines: Any) -> None:
    for doc in DOCS:
        for path in ARRAYS:
            sqlite_value, pg_value = both(engines, "SELECT json_array_length(?, ?)", json.dumps(doc), path)
            assert sqlite_value == pg_value, (doc, path)
    for haystack, needle in NEEDLES:
        sqlite_value, pg_value = both(engines, "SELECT instr(?, ?)", haystack, needle)
        assert sqlite_value == pg_value, (haystack, needle)


def test_the_known_differences_are_the_documented_ones(engines: Any) -> None:
    """docs/deployment.md "What differs": JSON true is 1 in SQLite, 'true' here; no view column reads one."""
    assert both(engines, "SELECT json_extract(?, '$.counted')", '{"counted": true}') == (1, "true")


def test_pg_sql_translates_placeholders_a_percent_and_the_index_hint() -> None:
    assert pg_sql("SELECT id FROM events INDEXED BY events_kind_host WHERE actor LIKE 'slack:%' AND id > ?") == \
        "SELECT id FROM events WHERE actor LIKE 'slack:%%' AND id > %s"
    assert pg_sql("SELECT 1 WHERE 'a%' LIKE 'a%'", placeholders=False) == "SELECT 1 WHERE 'a%' LIKE 'a%'"


def test_a_url_is_shown_without_its_password() -> None:
    shown = redacted_url("postgresql://bot:s3cret@db.internal:5433/proofbot?sslmode=require")
    assert "s3cret" not in shown and "db.internal" in shown and "proofbot" in shown
    assert "s3cret" not in redacted_url("postgresql://bot:s3cret@[not a url")
