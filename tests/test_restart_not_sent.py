"""A restart records ``restart-sent`` before it sends the command: when the database does not take that write,
nothing is sent (the service keeps its PID and its supervisord start count), the error says "not restarted", and
settling writes the operation's one ending, whose note says the restart was not sent (never "not known") in the
log, the thread, the parent, the plan and ``proofbot audit``. A restart told to halt (a rollout's sibling failed)
sends nothing either and ends refused. One loopback lab host (real sshd and supervisord), SQLite."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, demo_host
from bot.slack.audit_blocks import interrupted_message, interrupted_parent_message, interrupted_plan_status
from commands.errors import CouldNotRecord
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.restart.act import NotSent, restart
from commands.restart.plan import RestartPlan, plan_restart
from commands.store import locks
from commands.store.db import AuditStore
from commands.store.locks import LockHolder
from commands.store.log import audit_log
from commands.store.recovery import LEASE_ENDED, RESTART_SENT, UNRECORDED, Interrupted, settle_unrecorded, take_over
from commands.vocabulary import EventKind, Operation
from tests.conftest import run_cli
from tests.store_sql import rows
from tests.test_interrupted_truth import RefusedWrites
from tests.test_replicas import main_pid, starts
from tests.test_replicas_store import DEAD

REFUSE_RESTART_SENT = """
CREATE TRIGGER refuse_restart_sent BEFORE INSERT ON events
WHEN NEW.kind = 'step' AND json_extract(NEW.details, '$.step') = 'restart-sent'
BEGIN SELECT RAISE(ABORT, 'injected'); END
"""


@pytest_asyncio.fixture(scope="module")
async def host() -> AsyncIterator[tuple[DemoHost, Inventory]]:
    async with demo_host("ct138") as made:
        yield made, parse_inventory(yaml.safe_dump(made.inventory()), "i.yml")


@dataclass
class Planned:
    """A store, a restart of ct138 planned as ``operation_id``, and the service's main PID and start count then."""

    lab: DemoHost
    db: Path
    store: AuditStore
    plan: RestartPlan
    pid: int
    started: int

    async def unchanged(self) -> bool:
        return await main_pid(self.lab) == self.pid and starts(self.lab) == self.started


@asynccontextmanager
async def planned(host: tuple[DemoHost, Inventory], tmp_path: Path, operation_id: str) -> AsyncIterator[Planned]:
    lab, inventory = host
    db = tmp_path / "a.db"
    store = AuditStore.open(db)
    try:
        plan = await plan_restart(inventory.host("ct138"), operation_id=operation_id)
        yield Planned(lab, db, store, plan, await main_pid(lab), starts(lab))
    finally:
        store.close()


async def test_restart_sent_not_recorded_means_not_restarted(host: tuple[DemoHost, Inventory],
                                                             tmp_path: Path) -> None:
    async with planned(host, tmp_path, "op-unsent") as it:
        store, db = it.store, it.db
        await store.write(lambda db: db.execute(REFUSE_RESTART_SENT))
        store.write = RefusedWrites(store)  # type: ignore[method-assign]
        with pytest.raises(CouldNotRecord) as failed:
            await restart(it.plan, origin=Origin("cli:t", "cli"), audit=store)
        assert failed.value.message.startswith("not restarted: proofbot could not record it"), failed.value.message
        assert "same PID" in failed.value.hint and "injected" in failed.value.message
        assert await it.unchanged(), "nothing was sent: same PID, no new start"
        kinds = "SELECT kind, json_extract(details, '$.step') FROM events WHERE operation_id = 'op-unsent'"
        assert rows(db, kinds) == [(EventKind.REQUESTED, None), (EventKind.STEP, "before")], "nothing after it"
        await store.write(lambda db: db.execute("DROP TRIGGER refuse_restart_sent"))  # the database is back
        settled = await settle_unrecorded(store)
        assert [(op.operation_id, op.reason, op.last_step, op.not_sent) for op in settled] == [
            ("op-unsent", UNRECORDED, "before", True)]
        assert rows(db, "SELECT json_extract(details, '$.verdict') FROM events WHERE operation_id = 'op-unsent' "
                        "AND kind = 'finished'") == [("interrupted",)], "exactly one ending"
        assert await locks.holder_of(store, "ct138") is None
    said_not_sent(settled[0], db)
    await cli_says_not_sent(db, tmp_path)


async def test_a_restart_told_to_halt_sends_nothing_and_ends_refused(host: tuple[DemoHost, Inventory],
                                                                    tmp_path: Path) -> None:
    async with planned(host, tmp_path, "op-halted") as it:
        with pytest.raises(NotSent, match="not restarted: ct137's part failed; nothing was sent to ct138"):
            await restart(it.plan, origin=Origin("cli:t", "cli"), audit=it.store, halt=lambda: "ct137's part failed")
        assert await it.unchanged()
        ended = "SELECT kind FROM events WHERE operation_id = 'op-halted' AND kind IN ('refused', 'finished')"
        assert rows(it.db, ended) == [(EventKind.REFUSED,)]
        assert "restart-sent" not in str(rows(it.db, "SELECT details FROM events WHERE operation_id = 'op-halted'"))
        assert await locks.holder_of(it.store, "ct138") is None


def said_not_sent(op: Interrupted, db: Path) -> None:
    """The interrupted note of a restart never sent says so everywhere it is told, never "not known": its
    ``finished`` event, its thread, its parent and its plan's status line."""
    finished = rows(db, f"SELECT details FROM events WHERE operation_id = '{op.operation_id}' AND kind = 'finished'")
    details = json.loads(finished[0][0])
    assert details["summary"] == ("the audit database did not take a write before the restart was sent; the restart "
                                  "was not sent (proofbot records it before sending it): same PID expected"), details
    assert details["restart_sent"] is False
    text, blocks = interrupted_message(op)
    thread = json.dumps(blocks)
    assert "the restart was never sent" in thread and "ct138's service runs as before, same PID expected" in thread
    assert "not known" not in thread + text and "nothing is known" not in thread, thread
    parent_text, parent_blocks = interrupted_parent_message(op)
    for said in (parent_text, json.dumps(parent_blocks), interrupted_plan_status(op, ["U0BOB"], "2026-12-02")):
        assert "the restart was not sent" in said and "same PID expected" in said, said
        assert "not known" not in said, said


async def cli_says_not_sent(db: Path, tmp_path: Path) -> None:
    """``proofbot audit`` and its ``--json`` carry the same note."""
    env = {"PROOFBOT_INVENTORY": str(tmp_path / "none.yml")}
    listed = await run_cli("audit", "--db", str(db), "--json", env=env)
    assert listed.code == 0, listed.stderr
    (operation,) = json.loads(listed.stdout)["operations"]
    assert operation["verdict"] == "interrupted" and "the restart was not sent" in operation["note"], operation
    shown = await run_cli("audit", "--db", str(db), env=env)
    assert shown.code == 0, shown.stderr
    assert "restart ct138: INTERRUPTED" in shown.stdout and "the restart was not sent" in shown.stdout, shown.stdout
    assert "same PID expected" in shown.stdout


async def test_a_restart_whose_replica_died_before_sending_is_told_not_sent_and_one_after_is_not_known(
        tmp_path: Path) -> None:
    """The replica running it died (no write refused): before ``restart-sent`` was recorded nothing was sent; after
    it, what happened on the host is not known. Read from the log alone, as a live replica's take-over does."""
    store = AuditStore.open(tmp_path / "a.db")
    try:
        for host, operation_id, steps in (("ct138", "op-before", ["before"]),
                                          ("ct139", "op-after", ["before", RESTART_SENT])):
            log = audit_log(store, Operation.RESTART, operation_id, host, "slack:U0REQ")
            await log.requested(Origin("slack:U0REQ", "slack"))
            for step in steps:
                await log.step(step)
            lock = LockHolder(host, operation_id, Operation.RESTART, "slack:U0REQ", 1, "replica-b",
                              "2026-12-01T00:00:00Z", lease_holder=DEAD, lease_expires=time.time() - 1)
            await store.write(lambda db, lock=lock: db.table("locks").insert(asdict(lock)))
        interrupted = {op.operation_id: op for op in (await take_over(store))[0]}
    finally:
        store.close()
    before, after = interrupted["op-before"], interrupted["op-after"]
    assert (before.reason, before.not_sent, before.summary) == (
        LEASE_ENDED, True,
        f"{LEASE_ENDED}; the restart was not sent (proofbot records it before sending it): same PID expected")
    assert "the restart was never sent" in json.dumps(interrupted_message(before)[1])
    assert (after.reason, after.not_sent, after.summary) == (LEASE_ENDED, False, LEASE_ENDED)
    assert "nothing is known about what happened on the host after that" in json.dumps(interrupted_message(after)[1])
