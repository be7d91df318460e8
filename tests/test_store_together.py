"""Tier 1: on SQLite, the writes queued while the store's worker is busy share one transaction and one COMMIT (issue
27: a 20-host verify made 42 COMMITs, each an fsync), and each still behaves as a transaction of its own: committed
before its caller goes on, its own changes undone when it raises, the chain the same as written one by one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from commands.errors import CouldNotRecord
from commands.operation import Origin
from commands.store.chain import verify_chain
from commands.store.db import TOGETHER_MAX, AuditStore
from commands.store.handle import Db
from commands.store.log import audit_log
from commands.vocabulary import Operation


async def commits_seen(store: AuditStore) -> list[str]:
    """Every COMMIT the store's connection runs from now on."""
    seen: list[str] = []
    await store.read(lambda conn: conn.set_trace_callback(
        lambda sql: seen.append(sql) if sql.strip().upper() == "COMMIT" else None))
    return seen


async def held(store: AuditStore) -> tuple[threading.Event, asyncio.Future[None]]:
    """The worker kept busy (a write that waits) until the event is set, returned once the worker runs it: what is
    written meanwhile queues (no guess at how soon the worker starts, however loaded the machine)."""
    release, running = threading.Event(), threading.Event()

    def wait(db: Db) -> None:
        running.set()
        release.wait(10)
    busy = asyncio.ensure_future(store.write(wait))
    assert await asyncio.to_thread(running.wait, 10), "the store's worker never ran the held write"
    return release, busy


def note(name: str, fail: Exception | None = None) -> Callable[[Db], str]:
    def work(db: Db) -> str:
        db.execute("INSERT INTO deliveries (id, kind, claimed_at, replica) VALUES (?, 'test', 0, 'r')", [name])
        if fail is not None:
            raise fail
        return name
    return work


async def noted(store: AuditStore) -> list[str]:
    return [row[0] for row in await store.read(lambda conn: conn.execute(
        "SELECT id FROM deliveries ORDER BY rowid").fetchall())]


async def test_twenty_hosts_requests_written_at_once_share_commits_and_chain_as_written_one_by_one(
        tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        commits = await commits_seen(store)
        origin = Origin("root", "cli")
        await asyncio.gather(*(audit_log(store, Operation.VERIFY, f"op-{n}", f"ct{n}", "root").requested(origin)
                               for n in range(20)))
        assert len(commits) < 10  # the first may go alone; the rest queued while it committed
        rows = await store.read(lambda conn: conn.execute("SELECT id, operation_id FROM events ORDER BY id").fetchall())
        assert rows == [(n + 1, f"op-{n}") for n in range(20)]  # in the order written
        assert (await verify_chain(store)).intact
    finally:
        store.close()


async def test_a_write_that_raises_in_a_shared_transaction_undoes_only_its_own_changes(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        commits = await commits_seen(store)
        release, busy = await held(store)
        before = len(commits)
        writes = [asyncio.ensure_future(store.write(note(name, ValueError("refused") if name == "b" else None)))
                  for name in "abc"]
        await asyncio.sleep(0.05)
        release.set()
        await busy
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        assert len(commits) - before == 2  # the held write's, then the three's one
        assert outcomes[0] == "a" and outcomes[2] == "c" and isinstance(outcomes[1], ValueError)
        assert await noted(store) == ["a", "c"]
    finally:
        store.close()


async def test_the_database_not_taking_a_shared_transaction_fails_every_write_of_it_and_writes_none(
        tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        pages = (await store.read(lambda conn: conn.execute("PRAGMA page_count").fetchone()))[0]

        def fills_the_disk(db: Db) -> None:
            db.execute(f"PRAGMA max_page_count = {pages + 1}")  # as a full filesystem would refuse the pages
            db.execute("INSERT INTO deliveries (id, kind, claimed_at, replica) VALUES ('big', ?, 0, 'r')",
                       ["x" * 1_000_000])

        release, busy = await held(store)
        writes = [asyncio.ensure_future(store.write(work)) for work in (note("a"), fills_the_disk, note("c"))]
        await asyncio.sleep(0.05)
        release.set()
        await busy
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        assert all(isinstance(outcome, CouldNotRecord) for outcome in outcomes), outcomes
        assert "nothing of it was written" in str(outcomes[0])
        await store.write(lambda db: db.execute("PRAGMA max_page_count = 1073741823"))
        assert await noted(store) == []
        await store.write(note("d"))  # the database takes writes again
        assert await noted(store) == ["d"]
    finally:
        store.close()


async def test_a_transaction_takes_at_most_together_max_writes_the_rest_the_next(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        commits = await commits_seen(store)
        release, busy = await held(store)
        before = len(commits)
        writes = [asyncio.ensure_future(store.write(note(f"w{n:03}"))) for n in range(TOGETHER_MAX + 1)]
        await asyncio.sleep(0.05)
        release.set()
        await busy
        assert await asyncio.gather(*writes) == [f"w{n:03}" for n in range(TOGETHER_MAX + 1)]
        assert len(commits) - before == 3  # the held write's, the first TOGETHER_MAX's, the last one's
        assert await noted(store) == [f"w{n:03}" for n in range(TOGETHER_MAX + 1)]
    finally:
        store.close()


async def test_a_write_cancelled_while_queued_never_runs(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        release, busy = await held(store)
        cancelled = asyncio.ensure_future(store.write(note("cancelled")))
        kept = asyncio.ensure_future(store.write(note("kept")))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        await asyncio.sleep(0.01)  # the cancellation reaches the queued write (a callback of the loop's)
        release.set()
        await busy
        assert await kept == "kept"
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert await noted(store) == ["kept"]
    finally:
        store.close()


async def test_closing_cancels_the_writes_still_queued_and_refuses_new_ones(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    release, busy = await held(store)
    queued = asyncio.ensure_future(store.write(note("queued")))
    await asyncio.sleep(0.01)
    threading.Timer(0.2, release.set).start()  # the held write ends while close waits for it
    await asyncio.to_thread(store.close)
    await busy
    with pytest.raises(asyncio.CancelledError):
        await queued
    with pytest.raises(RuntimeError):  # closed: a write fails at once, as the executor refuses it
        await store.write(note("late"))
