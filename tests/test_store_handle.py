"""The one handle both backends give a store function (commands/store/handle.py): mypy checks each covers it; here,
that the chain walk streams on PostgreSQL (``iterate``) and reads SQLite's own streaming ``query``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from commands.store.handle import Streaming
from commands.store.lite import LiteDatabase
from commands.store.pg import PgDatabase


def test_only_postgresql_is_walked_through_its_server_side_cursor(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db")
    try:
        assert not isinstance(LiteDatabase(conn), Streaming)  # its query already streams a SELECT
    finally:
        conn.close()
    pg: Any = object()  # no connection is opened: the handle only holds it
    assert isinstance(PgDatabase(pg), Streaming)
