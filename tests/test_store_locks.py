"""One mutating operation per host, on SQLite and PostgreSQL; a dead holder's lock is released with a note."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import asdict
from pathlib import Path

import pytest

from commands.errors import Locked
from commands.store import locks
from commands.store.db import AuditStore
from commands.store.locks import LockHolder
from tests.store_sql import rows


async def test_second_operation_is_refused_naming_the_first(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    first = await locks.acquire(store, "ct129", "op-1", "restore", "slack:U1", channel="C1", thread_ts="1.2")
    with pytest.raises(Locked) as refused:
        await locks.acquire(store, "ct129", "op-2", "restart", "slack:U2")
    assert refused.value.exit_code == 4
    assert "restore op-1 by slack:U1" in refused.value.message
    assert refused.value.holder["thread_ts"] == "1.2"
    await locks.acquire(store, "ct130", "op-3", "restart", "slack:U2")  # other hosts are free
    await locks.release(store, first)
    assert (await locks.acquire(store, "ct129", "op-2", "restart", "slack:U2")).operation_id == "op-2"
    store.close()


async def test_lock_of_a_dead_process_is_released_with_an_audit_note(store_target: Path | str) -> None:
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    store = AuditStore.open(store_target)
    await store.write(lambda db: db.table("locks").insert(asdict(LockHolder(
        "ct129", "op-old", "restore", "slack:U9", dead.pid, socket.gethostname(), "2026-01-01T00:00:00Z"))))
    mine = await locks.acquire(store, "ct129", "op-new", "restart", "slack:U1")
    assert mine.operation_id == "op-new"
    store.close()
    [(_, details)] = rows(store_target, "SELECT kind, details FROM events WHERE kind = 'lock-released-stale'")
    assert json.loads(details)["holder"]["holder"] == "slack:U9"


async def test_lock_held_on_another_machine_is_not_guessed_stale(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    await store.write(lambda db: db.table("locks").insert(asdict(LockHolder(
        "ct129", "op-x", "restore", "cli:bob", 1, "other-machine", "2026-01-01T00:00:00Z"))))
    with pytest.raises(Locked, match="op-x"):
        await locks.acquire(store, "ct129", "op-new", "restart", "slack:U1")
    store.close()
