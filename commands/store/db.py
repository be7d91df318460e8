"""The audit DB's connection, SQLite (a path) or PostgreSQL (a ``postgresql://`` URL, commands/store/pg.py):
one worker thread owns it and runs every transaction, so the event loop never blocks on the database;
opening it applies the pending migrations (commands/store/migrations.py, pg_migrations.py). The work handed in
is typed as sqlite-utils' ``Database`` and gets the part of it the store uses, with the stdlib's sqlite3
(commands/store/lite.py) or psycopg (pg.py); a SQLite error of the file or its disk (full, read only, locked past
the timeout, an I/O error) is ``CouldNotRecord`` here, as PostgreSQL's are in pg.py.

Each append reads the chain head and inserts in one write transaction (SQLite's IMMEDIATE, PostgreSQL's
advisory lock), so two processes cannot fork the chain. On SQLite the writes queued while the worker was busy
share one such transaction, each in a savepoint, and one COMMIT (one fsync); each caller still returns only once
its write is committed. Rows are read as dicts and become dataclasses by
column name.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from commands.errors import CouldNotRecord, UsageError
from commands.store import SCHEMA_VERSION, is_pg_url
from commands.store.events import Event, event_of
from commands.store.lite import LiteDatabase, not_taken, sqlite_could_not_record

if TYPE_CHECKING:  # PostgreSQL's backend, the migrations and the leases load when used: a verify needs none of them
    from commands.store.handle import Db
    from commands.store.leases import Renewer
    from commands.store.pg import PgBackend

DB_ENV = "PROOFBOT_DB"
DEFAULT_DB = "proofbot.db"
TOGETHER_MAX = 100  # writes queued together in one transaction, at most (``write``)
BUSY_TIMEOUT_S = 10.0  # how long a write waits for another process's write lock before it is CouldNotRecord
T = TypeVar("T")


def db_target(explicit: str | None) -> Path | str:
    """``--db`` or PROOFBOT_DB: a ``postgresql://`` (or ``postgres://``) URL as it is, else a SQLite path."""
    text = explicit or os.environ.get(DB_ENV) or DEFAULT_DB
    return text if is_pg_url(text) else Path(text)


def db_path(explicit: str | None) -> Path:
    """The SQLite file of what runs on SQLite only (``serve --check``: whether a serve holds the file's lock)."""
    target = db_target(explicit)
    if isinstance(target, str):
        raise UsageError("`serve --check` reads a SQLite file only: on PostgreSQL replicas hold leases, not a file",
                         hint="check a replica with its /metrics (--metrics-port) or its HTTP port instead")
    return target


@dataclass
class WriteTally:
    """The writes committed while one Slack delivery is handled (bot/slack/once.py): none, nothing started."""

    writes: int = 0


# Set per delivery; the tasks its listener starts share the one tally (a context copy holds the same object).
WRITES: ContextVar[WriteTally | None] = ContextVar("proofbot_writes", default=None)


class AuditStore:
    def __init__(self, db: LiteDatabase | None, pg: PgBackend | None = None, path: Path | None = None) -> None:
        self._sqlite = db
        self._path = path  # the SQLite file, named in what a failed write says
        self._pg = pg
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proofbot-audit")
        self._renewer: Renewer | None = None
        self._queued: list[tuple[Callable[[Db], Any], Future[Any]]] = []  # writes for the worker's next transaction
        self._queue_lock = threading.Lock()
        self._apart: tuple[ThreadPoolExecutor, list[PgBackend]] | None = None  # write_apart's thread, connection
        # Operations of this process whose write the database did not take (operation, host by id): settled,
        # finished interrupted, once it takes writes again (commands/store/recovery.py settle_unrecorded).
        self.unrecorded: dict[str, tuple[str | None, str | None]] = {}
        self.unclaimed: set[str] = set()  # deliveries to release once it takes writes again (deliveries.py)
        # Operations whose write was not taken: they write nothing more here, ever (commands/store/log.py).
        self.cut_off: dict[str, CouldNotRecord] = {}  # each with the failure that stopped it

    @property
    def dialect(self) -> str:
        return "postgresql" if self._pg is not None else "sqlite"

    @property
    def _db(self) -> LiteDatabase:
        assert self._sqlite is not None, "a SQLite-only path ran on PostgreSQL"
        return self._sqlite

    @classmethod
    def open(cls, path: Path | str, *, existing: bool = False) -> AuditStore:
        """A SQLite file (a path) or a PostgreSQL database (a ``postgresql://`` URL), migrated. ``existing``: a
        PostgreSQL database without an audit log is refused, not given one (a reader checks a file's existence)."""
        if isinstance(path, str) and is_pg_url(path):
            from commands.store.pg import PgBackend, redacted_url
            from commands.store.pg_schema import pg_has_table  # with schema.py: not loaded by a run on SQLite

            backend = PgBackend(path)
            if existing and not backend.atomic(False, lambda db: pg_has_table(db, "events")):
                backend.close()
                raise UsageError(f"no audit log in the PostgreSQL database {redacted_url(path)}",
                                 hint="check --db (or PROOFBOT_DB): it names the database proofbot writes to")
            return cls._opened(cls(None, backend))
        path = Path(path)
        try:
            if path.parent and not path.parent.exists():
                raise UsageError(f"audit database folder {path.parent} does not exist", hint="pass --db PATH")
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                                   timeout=BUSY_TIMEOUT_S)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
            db = LiteDatabase(conn)
        except sqlite3.Error as exc:
            cause = not_taken(exc)
            if cause not in (None, "corrupt"):  # the file will not take writes: as a failed write says it
                raise sqlite_could_not_record(path, exc, cause, False, opening=True) from None
            # Not SQLite's at all (--db naming the inventory, say): the wrong file was given.
            raise UsageError(f"cannot open audit database {path}: {exc}", hint="pass --db PATH") from None
        return cls._opened(cls(db, path=path))

    @classmethod
    def _opened(cls, store: AuditStore) -> AuditStore:
        try:
            store._worker.submit(store._migrate).result()
        except BaseException:
            store.close()
            raise
        return store

    def keep_leases(self) -> None:
        """This process holds a lease now (commands/store/leases.py): renew it while the store is open."""
        if self._renewer is None:
            from commands.store.leases import Renewer

            self._renewer = Renewer(lambda: self._worker.submit(self._write_now, self._renew).result())

    def _renew(self, db: Db) -> int:
        from commands.store.leases import process_holder, renew

        return renew(db, process_holder())

    def _write_now(self, work: Callable[[Db], T]) -> T:
        """``write`` from the worker thread itself."""
        if self._pg is not None:
            return self._pg.atomic(True, work)  # PgDatabase is a Db too (mypy checks it)
        return self._atomic("BEGIN IMMEDIATE", work)

    async def write_apart(self, work: Callable[[Db], T]) -> T:
        """A write outside the hash chain that must not wait for the log (a Slack delivery claim, before the ack):
        on PostgreSQL its own thread and connection, under no writer's lock, so it never queues behind the appends
        of the operations running (at 50 verifies at once those held acks past Slack's 3 s); on SQLite ``write``."""
        if self._pg is None:
            return await self.write(work)
        if self._apart is None:
            self._apart = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="proofbot-apart"), [])
        worker, backend = self._apart
        url = self._pg.url

        def run() -> T:
            if not backend:  # connected in its own thread, on first use
                from commands.store.pg import PgBackend

                backend.append(PgBackend(url))
            return backend[0].atomic(True, work, chained=False)  # PgDatabase is a Db too (mypy checks it)
        return await asyncio.get_running_loop().run_in_executor(worker, run)

    def close(self) -> None:
        if self._renewer is not None:
            self._renewer.stop()
        if self._apart is not None:
            self._apart[0].shutdown(wait=True, cancel_futures=True)
            for backend in self._apart[1]:
                backend.close()
        self._worker.shutdown(wait=True, cancel_futures=True)
        with self._queue_lock:  # writes whose drain the shutdown cancelled: cancelled too, as the executor's are
            left, self._queued = self._queued, []
        for _work, done in left:
            done.cancel()
        if self._pg is not None:
            self._pg.close()
        else:
            self._db.conn.close()

    def _migrate(self) -> None:
        if self._pg is not None:
            from commands.store.migrations import SCHEMA_MIGRATIONS
            from commands.store.pg_migrations import PG_MIGRATIONS, apply_pending_pg

            self._pg.atomic(True, lambda db: db.execute(SCHEMA_MIGRATIONS))
            for version in range(1, len(PG_MIGRATIONS) + 1):
                self._pg.atomic(True, functools.partial(apply_pending_pg, version=version))
            return
        if self._current():
            return
        from commands.store.migrations import MIGRATIONS, SCHEMA_MIGRATIONS, apply_pending

        applied = self._sqlite_call(lambda: (self._db.execute(SCHEMA_MIGRATIONS), {
            row["version"] for row in self._db.query("SELECT version FROM schema_migrations")})[1], opening=True)
        for version, (description, sql) in enumerate(MIGRATIONS, start=1):
            if version not in applied:
                self._atomic("BEGIN IMMEDIATE", functools.partial(apply_pending, version=version,
                                                                    description=description, sql=sql))

    def _current(self) -> bool:
        """Whether every migration is applied (versions 1 to ``SCHEMA_VERSION`` recorded): the one read a DB already
        migrated costs, without loading the migrations. Anything else (a new file, an older proofbot's DB, an error
        of any kind) is False: the migrations run, or fail, exactly as they would have."""
        try:
            row = self._db.conn.execute("SELECT count(*) FROM schema_migrations WHERE version BETWEEN 1 AND ?",
                                        [SCHEMA_VERSION]).fetchone()
        except sqlite3.Error:
            return False
        return bool(row and row[0] == SCHEMA_VERSION)

    def _atomic(self, begin: str, work: Callable[[Db], T]) -> T:
        """work(db) between ``begin`` and COMMIT, rolled back if it raises; only ever on the worker thread."""
        conn = self._db.conn
        state = {"committing": False}

        def transaction() -> T:
            conn.execute(begin)
            try:
                value = work(self._db)
                state["committing"] = begin != "BEGIN DEFERRED"  # a read has nothing to lose at its COMMIT
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # a RAISE(ROLLBACK) or a failed COMMIT may have ended it already
                    conn.execute("ROLLBACK")
                raise
            return value
        return self._sqlite_call(transaction, state=state)

    def _sqlite_call(self, call: Callable[[], T], *, state: dict[str, bool] | None = None,
                     opening: bool = False) -> T:
        """call(), a SQLite error of the file or its disk said as ``CouldNotRecord`` (the store's one boundary:
        an operation's first write not taken stops it, commands/store/log.py); an error of the SQL stays as it is."""
        try:
            return call()
        except sqlite3.Error as exc:
            cause = not_taken(exc)
            if cause is None:
                raise
            committing = bool(state and state["committing"])
            raise sqlite_could_not_record(self._path or "", exc, cause, committing, opening=opening) from None

    async def _run(self, work: Callable[[], T]) -> T:
        # One worker thread owns the connection: work never overlaps, even when the task
        # awaiting it is cancelled mid-way (a cancelled to_thread would keep running
        # while the next call started on the same connection).
        return await asyncio.get_running_loop().run_in_executor(self._worker, work)

    async def write(self, work: Callable[[Db], T]) -> T:
        """Run work(db) in one IMMEDIATE transaction, in the store's worker thread; returns once it is committed.

        On SQLite the writes queued while the worker was busy share that transaction, in order, each in a
        savepoint: one COMMIT (one fsync) for them all (``_write_queued``). ``db.query`` yields dict rows;
        materialise them inside ``work``: the transaction ends with it."""
        if self._pg is not None:
            value = await self._run(lambda: self._write_now(work))
        else:
            value = await asyncio.wrap_future(self._queue(work))
        tally = WRITES.get()
        if tally is not None:
            tally.writes += 1
        return value

    def _queue(self, work: Callable[[Db], T]) -> Future[T]:
        done: Future[T] = Future()
        with self._queue_lock:
            self._queued.append((work, done))
            if len(self._queued) == 1:  # else the drain submitted already, not started yet, takes it too
                try:
                    self._worker.submit(self._write_queued)
                except BaseException:  # closed: this write fails as the executor fails it, and queues nothing
                    self._queued.clear()
                    raise
        return done

    def _write_queued(self) -> None:
        """The writes queued, in ONE transaction, each in a savepoint: a write that raises has its own changes
        undone and its exception given to its caller alone, as a transaction of its own would; the database not
        taking the transaction (CouldNotRecord: full, read only, locked past the timeout, I/O) fails every write of
        it, none of them written. A caller cancelled before this ran is left out, as the executor leaves it out."""
        with self._queue_lock:  # at most TOGETHER_MAX: the first write queued waits for no more than those
            queued, self._queued = self._queued[:TOGETHER_MAX], self._queued[TOGETHER_MAX:]
            if self._queued:
                self._worker.submit(self._write_queued)
        batch = [(work, done) for work, done in queued if done.set_running_or_notify_cancel()]
        if len(batch) == 1:
            work, done = batch[0]
            try:
                done.set_result(self._atomic("BEGIN IMMEDIATE", work))
            except BaseException as exc:
                done.set_exception(exc)
            return
        outcomes: list[tuple[bool, Any]] = []
        try:
            self._atomic("BEGIN IMMEDIATE", lambda db: self._each_in_a_savepoint(db, batch, outcomes))
        except BaseException as exc:
            outcomes = [(False, exc)] * len(batch)
        for (_work, done), (ok, outcome) in zip(batch, outcomes, strict=True):
            if ok:
                done.set_result(outcome)
            else:
                done.set_exception(outcome)

    def _each_in_a_savepoint(self, db: Db, batch: list[tuple[Callable[[Db], Any], Future[Any]]],
                             outcomes: list[tuple[bool, Any]]) -> None:
        conn = self._db.conn
        for work, _done in batch:
            conn.execute("SAVEPOINT queued")
            try:
                outcomes.append((True, work(db)))
            except Exception as exc:
                if (isinstance(exc, sqlite3.Error) and not_taken(exc)) or not conn.in_transaction:
                    raise  # the database's failure, not this write's: the whole transaction is not taken
                conn.execute("ROLLBACK TO queued")
                outcomes.append((False, exc))
            conn.execute("RELEASE queued")

    async def snapshot(self, query: Callable[[Db], T]) -> T:
        """Run query(db) in one read transaction: a consistent snapshot that never blocks writers (WAL)."""
        pg = self._pg
        if pg is not None:
            return await self._run(lambda: pg.atomic(False, query))  # PgDatabase is a Db too (mypy checks it)
        return await self._run(lambda: self._atomic("BEGIN DEFERRED", query))

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``write`` with the raw connection (tests and the bench use it; on PostgreSQL a psycopg one)."""
        return await self.write(lambda db: work(db.conn))

    async def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """``snapshot`` with the raw connection (tests and the bench use it)."""
        return await self.snapshot(lambda db: query(db.conn))

    async def events_of(self, operation_id: str) -> list[Event]:
        return await self.snapshot(lambda db: [
            event_of(row) for row in db.query("SELECT * FROM events WHERE operation_id = ? ORDER BY id",
                                              [operation_id])])
