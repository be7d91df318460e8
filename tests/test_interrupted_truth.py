"""What an interrupted operation says must be exactly true: who stopped (this bot restarted, another replica's
lease ended, the database did not take a write), in its thread and its ``finished`` event; its parent message and
its plan say interrupted too; and an operation whose write failed does nothing more, so settling it writes its
one ending."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.demo.host import demo_host
from bot.slack import recovery as slack_recovery
from bot.slack.audit_blocks import interrupted_message, interrupted_parent_message
from bot.slack.listening import BotContext
from bot.slack.recovery import take_over_leases
from commands.errors import CouldNotRecord
from commands.inventory import Approvals, parse_inventory
from commands.operation import Origin
from commands.restore import apply_restore, request_restore
from commands.store import approvals, locks
from commands.store import log as store_log
from commands.store.db import AuditStore
from commands.store.locks import LockHolder
from commands.store.log import audit_log
from commands.store.recovery import LEASE_ENDED, STOPPED, UNRECORDED, Interrupted, recover, settle_unrecorded
from commands.vocabulary import EventKind, Operation, PlanState
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.store_sql import rows
from tests.test_replicas_store import DEAD

CHANNEL = "C0OPS"
INVENTORY = "channels: [C0OPS]\nhosts:\n  ct129: {address: 10.0.0.1}\n"


def interrupted(reason: str, **fields: Any) -> Interrupted:
    return Interrupted(**{"operation_id": "op-1", "operation": "restore", "host": "ct129", "channel": CHANNEL,
                          "thread_ts": "1.0", "last_kind": "step", "last_at": "2026-12-02T00:00:00Z",
                          "last_step": "snapshot: 2 file(s) copied", **fields}, reason=reason)


@pytest.mark.parametrize(("reason", "headline", "why"), [
    (STOPPED, "proofbot restarted: restore of ct129 was interrupted", "proofbot stopped while this restore"),
    (LEASE_ENDED, "the proofbot replica running this stopped (its lease ended): restore of ct129 was interrupted",
     "the proofbot replica running this stopped (its lease ended) while this restore"),
    (UNRECORDED, "restore of ct129 was interrupted: the audit database did not take a write",
     "the audit database did not take a write while this restore"),
])
def test_the_notice_says_who_stopped(reason: str, headline: str, why: str) -> None:
    for op in (interrupted(reason), interrupted(reason, operation="rollout", host=None, fleet_target="gpu-west"),
               interrupted(reason, operation="verify", host=None, fleet_target="gpu-west")):
        text, blocks = interrupted_message(op)
        target = op.fleet_target or op.host
        assert text == headline.replace("restore of ct129", f"{op.operation} of {target}")
        assert why.replace("restore", op.operation) in json.dumps(blocks)
        parent_text, parent_blocks = interrupted_parent_message(op)
        assert parent_text.startswith(f"{op.operation} of {target}: interrupted (")
        assert why.split(" while ")[0] in parent_text and "interrupted" in json.dumps(parent_blocks)
    if reason != STOPPED:
        assert "restarted" not in interrupted_message(interrupted(reason))[0], "no bot restarted"


async def a_dead_replicas_restore(store: AuditStore, parent_ts: str) -> None:
    """An approved restore of ct129 run by replica B (dead: its lease ended), one step recorded."""
    await approvals.create(store, plan_id="op-dead", operation=Operation.RESTORE, host="ct129",
                           requested_by="slack:U1", plan_hash="h", details={}, approvals=Approvals(approvers=["U3"]))
    await store.write(lambda db: db.execute("UPDATE plans SET state = ?", [PlanState.APPROVED]))
    log = audit_log(store, Operation.RESTORE, "op-dead", "ct129", "slack:U1")
    await log.requested(Origin("slack:U1", "slack", CHANNEL, parent_ts))
    await log.step("snapshot", files=2)
    lock = LockHolder("ct129", "op-dead", Operation.RESTORE, "slack:U1", 1, "replica-b", "2026-12-01T00:00:00Z",
                      lease_holder=DEAD, lease_expires=time.time() - 1)
    await store.write(lambda db: db.table("locks").insert(asdict(lock)))


async def a_dead_replicas_restore_in(slack: FakeSlack, store: AuditStore) -> tuple[AsyncWebClient, str]:
    """The restore's parent message on its last progress line, and the restore (``a_dead_replicas_restore``)."""
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    parent = str((await client.chat_postMessage(channel=CHANNEL, text="restore ct129: restoring…"))["ts"])
    await a_dead_replicas_restore(store, parent)
    return client, parent


async def taken_over(store: AuditStore, client: AsyncWebClient, until_done: Callable[[], object]) -> None:
    """One live replica's lease turns, until ``until_done`` (what it tells in Slack is seen)."""
    turns = asyncio.create_task(take_over_leases(BotContext(parse_inventory(INVENTORY, "i.yml"), store), client,
                                                 every_s=0.05))
    try:
        await until("the interrupted operation told in Slack", until_done)
    finally:
        turns.cancel()
        await asyncio.gather(turns, return_exceptions=True)


async def test_a_takeover_says_the_replica_stopped_and_updates_the_parent_and_the_plan(
        store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    try:
        async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
            client, parent = await a_dead_replicas_restore_in(slack, store)
            await taken_over(store, client, lambda: "interrupted" in slack.message(CHANNEL, parent).text)
            [note] = slack.thread(CHANNEL, parent)
            assert note.text == ("the proofbot replica running this stopped (its lease ended): restore of ct129 "
                                 "was interrupted"), note.text
            said = slack.message(CHANNEL, parent).text
            assert said.startswith("restore of ct129: interrupted (the proofbot replica running this stopped"), said
            assert "restoring" not in said
        [(finished,)] = rows(store_target, "SELECT details FROM events WHERE kind = 'finished' "
                                           "AND operation_id = 'op-dead'")
        assert json.loads(finished)["summary"] == LEASE_ENDED, "the record says which: no bot restarted"
        [(released,)] = rows(store_target, "SELECT details FROM events WHERE kind = ?",
                             [EventKind.LOCK_RELEASED_STALE])
        assert "restart" not in json.loads(released)["reason"] and LEASE_ENDED in json.loads(released)["reason"]
        assert rows(store_target, "SELECT state FROM plans") == [(PlanState.INTERRUPTED,)]
    finally:
        store.close()


async def test_a_slack_error_on_the_parent_is_logged_never_fatal(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """The parent is gone (deleted in Slack): the thread is still told, the failure logged, not raised."""
    store = AuditStore.open(tmp_path / "a.db")
    try:
        async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
            client, parent = await a_dead_replicas_restore_in(slack, store)
            del slack.messages[(CHANNEL, parent)]  # deleted by someone meanwhile (the fake has no chat.delete)
            with caplog.at_level(logging.WARNING, logger="proofbot.recovery"):
                await taken_over(store, client, lambda: "could not update the parent" in caplog.text)
            assert [m.text for m in slack.thread(CHANNEL, parent)] == [
                "the proofbot replica running this stopped (its lease ended): restore of ct129 was interrupted"]
            assert [w for w in slack.warnings if "matches no message" not in w] == [], slack.warnings
            slack.warnings.clear()  # the thread's parent is gone: expected here
        assert "could not update the parent message of op-dead: message_not_found" in caplog.text
        assert rows(tmp_path / "a.db", "SELECT state FROM plans") == [(PlanState.INTERRUPTED,)]
    finally:
        store.close()


class RefusedWrites:
    """The store's writes, refused as a database that is down refuses them (CouldNotRecord) while a SQLite
    trigger aborts them; every other write is taken, as by a database back at once."""

    def __init__(self, store: AuditStore) -> None:
        self.write = store.write

    async def __call__(self, work: Any) -> Any:
        try:
            return await self.write(work)
        except sqlite3.DatabaseError as exc:
            raise CouldNotRecord(f"injected: {exc}") from None


REFUSE_SNAPSHOT_STEP = """
CREATE TRIGGER refuse_snapshot BEFORE INSERT ON events
WHEN NEW.kind = 'step' AND json_extract(NEW.details, '$.name') = 'snapshot'
BEGIN SELECT RAISE(ABORT, 'injected'); END
"""


async def test_a_restore_whose_write_failed_stops_there_and_is_settled_with_one_ending(tmp_path: Path) -> None:
    """The restore's snapshot step is not taken: it replaces no file, writes nothing more (its own error
    ending would say "internal error" once the database is back), and settling it writes its one ending."""
    async with demo_host("ct137") as host:
        inventory = parse_inventory(yaml.safe_dump(host.inventory()), "i.yml")
        db = tmp_path / "a.db"
        store = AuditStore.open(db)
        try:
            plan = await request_restore(inventory, inventory.host("ct137"), origin=Origin("cli:t", "cli"),
                                         audit=store)
            decided = await approvals.decide(store, plan.operation_id, "cli:approver", "approved",
                                             inventory.approvals)
            live = {path.name: path.read_bytes() for path in host.live_dir.iterdir() if path.is_file()}
            await store.write(lambda db: db.execute(REFUSE_SNAPSHOT_STEP))
            store.write = RefusedWrites(store)  # type: ignore[method-assign]
            with pytest.raises(CouldNotRecord):
                await apply_restore(plan, decided, actor="cli:t", audit=store, move_extras=True)
            assert {path.name: path.read_bytes() for path in host.live_dir.iterdir() if path.is_file()} == live, \
                "no file replaced, none moved: nothing after the write that failed"
            ended = "SELECT kind, json_extract(details, '$.verdict'), json_extract(details, '$.summary') FROM events " \
                    "WHERE operation_id = ? AND kind IN ('finished', 'interrupted', 'refused', 'cancelled')"
            assert rows(db, ended.replace("?", f"'{plan.operation_id}'")) == [], "nothing written after it"
            settled = await settle_unrecorded(store)
            assert [(op.operation_id, op.reason) for op in settled] == [(plan.operation_id, UNRECORDED)]
            assert rows(db, ended.replace("?", f"'{plan.operation_id}'")) == [
                ("finished", "interrupted", UNRECORDED)], "exactly one ending"
            assert await settle_unrecorded(store) == [], "settled once"
            assert await locks.holder_of(store, "ct137") is None, "its host is free"
            assert rows(db, "SELECT state FROM plans") == [(PlanState.INTERRUPTED,)]
        finally:
            store.close()


async def test_a_stopped_operation_writes_nothing_more_but_others_may_free_its_stale_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_log, "CUT_OFF_MAX", 1)  # the newest kept; an old one long settled goes
    store = AuditStore.open(tmp_path / "a.db")
    try:
        log = audit_log(store, Operation.RESTART, "op-cut", "ct129", "cli:t")
        await log.requested(Origin("cli:t", "cli"))
        store.write = RefusedWrites(store)  # type: ignore[method-assign]
        await store.write(lambda db: db.execute("CREATE TRIGGER refuse_all BEFORE INSERT ON events "
                                                "BEGIN SELECT RAISE(ABORT, 'injected'); END"))
        with pytest.raises(CouldNotRecord, match="injected"):
            await log.step("restart-sent")
        await store.write(lambda db: db.execute("DROP TRIGGER refuse_all"))  # the database is back
        with pytest.raises(CouldNotRecord, match="already failed to record a step"):
            await log.step("ready")
        with pytest.raises(CouldNotRecord, match="already failed to record a step"):
            await log.interrupted("its own ending")
        await log.lock_released_stale("freed for another operation", {"host": "ct129"})
        assert rows(tmp_path / "a.db", "SELECT kind FROM events ORDER BY id") == [
            (EventKind.REQUESTED,), (EventKind.LOCK_RELEASED_STALE,)]
        assert store.unrecorded == {"op-cut": (Operation.RESTART, "ct129")}
        await store.write(lambda db: db.execute("CREATE TRIGGER refuse_all BEFORE INSERT ON events "
                                                "BEGIN SELECT RAISE(ABORT, 'injected'); END"))
        with pytest.raises(CouldNotRecord, match="injected"):
            await audit_log(store, Operation.VERIFY, "op-next", "ct130", "cli:t").requested(Origin("cli:t", "cli"))
        assert list(store.cut_off) == ["op-next"], "bounded"
    finally:
        store.close()


async def test_at_start_another_machines_dead_replica_is_not_called_a_restart(tmp_path: Path) -> None:
    """``recover`` at this bot's start: an operation of this machine's dead process is "proofbot restarted"; one
    whose lock another machine's replica held, its lease ended, is that replica stopping."""
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()  # a process that certainly ended: this bot's earlier life
    store = AuditStore.open(tmp_path / "a.db")
    try:
        for operation_id, host, machine, pid, lease in (("op-other", "ct129", "replica-b", 1, time.time() - 1),
                                                        ("op-mine", "ct130", socket.gethostname(), gone.pid,
                                                         time.time() + 60)):
            await audit_log(store, Operation.RESTART, operation_id, host, "slack:U1").requested(
                Origin("slack:U1", "slack", CHANNEL, "1.0"))
            lock = LockHolder(host, operation_id, Operation.RESTART, "slack:U1", pid, machine,
                              "2026-12-01T00:00:00Z", lease_holder=f"{machine}:{pid}:x", lease_expires=lease)
            await store.write(lambda db, lock=lock: db.table("locks").insert(asdict(lock)))
        told, _ = await recover(store)
        assert {op.operation_id: op.reason for op in told} == {"op-other": LEASE_ENDED, "op-mine": STOPPED}
        assert {op.operation_id: interrupted_message(op)[0] for op in told} == {
            "op-other": "the proofbot replica running this stopped (its lease ended): restart of ct129 was interrupted",
            "op-mine": "proofbot restarted: restart of ct130 was interrupted"}
    finally:
        store.close()


async def test_a_slack_call_past_its_bound_is_given_up_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slack_recovery, "SLACK_CALL_S", 0.0)  # every call is past its bound at once
    store = AuditStore.open(tmp_path / "a.db")
    try:
        async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
            client, parent = await a_dead_replicas_restore_in(slack, store)
            with caplog.at_level(logging.WARNING, logger="proofbot.recovery"):
                await taken_over(store, client, lambda: "could not update the parent" in caplog.text)
        assert "could not post in the thread of op-dead: TimeoutError" in caplog.text
        assert "could not update the parent message of op-dead: TimeoutError" in caplog.text
        assert slack.message(CHANNEL, parent).text == "restore ct129: restoring…", "given up, not sent late"
    finally:
        store.close()
