"""The audit store on PostgreSQL: psycopg 3 connections behind the part of sqlite-utils' ``Database`` the
store's SQL uses (``query``, ``execute``, ``table(name).insert/delete``), so every reader and writer is
written once for both backends.

Sync psycopg on the store's one worker thread, not async psycopg: the store hands *synchronous* callables
(shared with SQLite) into a transaction, so an async driver would need a second, async copy of every one.
psycopg-pool keeps one connection, checks it before each transaction and replaces it when PostgreSQL restarts;
every wait is bounded (docs/deployment.md "PostgreSQL restarting"), and a write that cannot be made is
CouldNotRecord, never a hang. Every write transaction
takes one transaction-scoped advisory lock first: writes are serialised exactly as SQLite's BEGIN
IMMEDIATE serialises them, so the chain stays one chain and check-then-insert (locks, plans) cannot race.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

from commands.errors import CouldNotRecord, UsageError
from commands.store.lite import could_not_record

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

# The one lock every write transaction takes ('proofbot' in ASCII, truncated to a bigint).
WRITE_LOCK = 0x70726F6F66626F74
CONNECT_TIMEOUT_S = 10
# How long a transaction waits for a connection while the server is away: short, since a Slack command waits
# for its claim before its 3 s ack, and a restart of PostgreSQL itself takes about a second.
POOL_TIMEOUT_S = 2.0
# Once a wait ran out, the next ones (an operation's failing step, then its ending, then its lock) wait this
# little until a connection comes back: the user hears "could not record" in about 2 s, not 2 s per write. A
# connection the pool makes meanwhile is handed out at once, so nothing slows the recovery.
FAILING_WAIT_S = 0.2
# How long the pool keeps reconnecting in the background (backoff 1, 2, 4 s…) before it waits for the next
# transaction to try again at once: a database back after a long outage is found by the next write, not after
# the pool's doubling backoff has grown to minutes.
RECONNECT_TIMEOUT_S = 10.0
# A TCP peer that vanishes without a reset (a failover, a cut link) is found dead in about 30 s, not hours.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
              "tcp_user_timeout": 30_000}
LOCK_TIMEOUT = "10s"  # as SQLite's busy timeout: a write waits this long for another writer
STATEMENT_TIMEOUT = "120s"
PRIMARY_KEYS = {"locks": "host"}  # every other table's key is `id`
STREAM_ROWS = 2000
_cursors = itertools.count(1)
T = TypeVar("T")


# SQLite's query planner hint (commands/store/trail.py names its covering index): PostgreSQL has none, and
# picks the same index by itself.
_INDEXED_BY = re.compile(r"\s+INDEXED BY \w+")


def pg_sql(sql: str, *, placeholders: bool = True) -> str:
    """The store's SQL, written once in SQLite's words, in PostgreSQL's: the one place they differ at run time.
    ``?`` placeholders become psycopg's ``%s`` (a literal ``%`` doubled; none of the SQL has a ``?`` inside a
    string literal), and an ``INDEXED BY`` hint goes."""
    sql = _INDEXED_BY.sub("", sql)
    return sql.replace("%", "%%").replace("?", "%s") if placeholders else sql


class PgTable:
    """``db.table(name)``: insert a dict row, delete by primary key (the subset the store uses)."""

    def __init__(self, db: PgDatabase, name: str) -> None:
        self.db, self.name = db, name
        self.last_rowid: int | None = None

    def insert(self, row: dict[str, Any]) -> PgTable:
        columns = ", ".join(f'"{column}"' for column in row)
        marks = ", ".join("?" for _ in row)
        found = next(self.db.query(f'INSERT INTO "{self.name}" ({columns}) VALUES ({marks}) RETURNING *',
                                   list(row.values())), None)
        self.last_rowid = found.get("id") if found else None
        return self

    def delete(self, key: Any) -> PgTable:
        column = PRIMARY_KEYS.get(self.name, "id")
        self.db.execute(f'DELETE FROM "{self.name}" WHERE "{column}" = ?', [key])
        return self


class PgDatabase:
    """One connection inside one transaction, spoken to as the store speaks to sqlite-utils."""

    dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        if not params:  # no parameters: psycopg sends the text as it is (a '%' in a LIKE stays one)
            return self.conn.execute(pg_sql(sql, placeholders=False).encode())
        return self.conn.execute(pg_sql(sql).encode(), list(params))

    def query(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]:
        cursor = self.execute(sql, params)
        return iter(cursor.fetchall() if cursor.description else [])

    def table(self, name: str) -> PgTable:
        return PgTable(self, name)

    def iterate(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]:
        """A long read (the whole chain) through a server-side cursor, STREAM_ROWS at a time: ``query`` holds
        every row at once, and other queries may run while this one is read (unlike libpq's row-by-row mode)."""
        with self.conn.cursor(name=f"proofbot_{next(_cursors)}") as cursor:
            cursor.itersize = STREAM_ROWS
            cursor.execute(pg_sql(sql).encode(), list(params) if params else None)
            yield from cursor


class PgBackend:
    """A pool of one connection to the URL's database; each call of ``atomic`` is one transaction."""

    def __init__(self, url: str) -> None:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        self.url = url
        self._failed_at = -math.inf  # when a wait for a connection last ran out
        try:
            given = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise UsageError(f"bad PostgreSQL URL {redacted_url(url)}: {exc}",
                             hint="use postgresql://USER@HOST/DBNAME (see docs/deployment.md)") from None
        # The URL's own options (a search_path, say) are kept; ours are added after them.
        options = " ".join(filter(None, [str(given.get("options") or ""), f"-c lock_timeout={LOCK_TIMEOUT}",
                                         f"-c statement_timeout={STATEMENT_TIMEOUT}"]))
        self._pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
            url, min_size=1, max_size=1, open=False, check=ConnectionPool.check_connection,
            timeout=POOL_TIMEOUT_S, reconnect_timeout=RECONNECT_TIMEOUT_S,
            kwargs={"autocommit": True, "row_factory": dict_row, "connect_timeout": CONNECT_TIMEOUT_S,
                    "options": options, **KEEPALIVES}, name="proofbot-audit")
        # One direct attempt first: the pool retries until its timeout and keeps the server's words in its log.
        failed = _connect_error(url)
        try:
            if failed is None:
                self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # PoolTimeout
            failed = str(exc)
        if failed is not None:
            self._pool.close()
            raise CouldNotRecord(f"cannot open audit database {redacted_url(url)}: {failed}",
                                 hint="check the PostgreSQL URL (--db / PROOFBOT_DB) and that the server runs; "
                                      "nothing was done")

    def atomic(self, write: bool, work: Callable[[PgDatabase], T], *, chained: bool = True) -> T:
        """work(db) in one transaction; CouldNotRecord when the server cannot be reached or drops it (never
        retried here: the work may have told its caller things, and a COMMIT cut short may have been taken).
        ``chained``: a write waits for every other writer; a write that keys itself (a delivery claim's primary
        key) passes ``False`` and queues behind none of them."""
        import psycopg
        from psycopg_pool import PoolTimeout

        committing = False
        wait = FAILING_WAIT_S if time.monotonic() - self._failed_at < 2 * POOL_TIMEOUT_S else POOL_TIMEOUT_S
        try:
            with self._pool.connection(timeout=wait) as conn:
                # A write waits for every other writer (the chain head stays still); a read is one snapshot.
                conn.execute(b"BEGIN ISOLATION LEVEL READ COMMITTED" if write
                             else b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    if write and chained:
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", [WRITE_LOCK])
                    value = work(PgDatabase(conn))
                    committing = True
                    conn.execute(b"COMMIT")
                except BaseException:
                    with suppress(Exception):  # a broken connection is the pool's to replace
                        conn.execute(b"ROLLBACK")
                    raise
                return value
        except PoolTimeout:
            self._failed_at = time.monotonic()
            raise self._could_not_record(f"no connection within {wait:g} s (the server is down, "
                                         "restarting or unreachable)", committing) from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            words = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise self._could_not_record(words, committing) from None

    def _could_not_record(self, why: str, committing: bool) -> CouldNotRecord:
        return could_not_record(redacted_url(self.url), why, committing)

    def close(self) -> None:
        self._pool.close()


def redacted_url(url: str) -> str:
    """The URL without its password (it is shown in errors and logs)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(url)
    except Exception:
        return url.split("://", 1)[0] + "://…"
    parts.pop("password", None)
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


def _connect_error(url: str) -> str | None:
    """Why a connection fails, in the server's or libpq's words (one direct attempt, bounded)."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None
