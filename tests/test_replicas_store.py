"""The delivery claims that keep a Slack retry from starting anything twice: which deliveries are keyed and how
(pure), and the claim itself on both backends (a second claim of one id loses; old claims are let go). And a
live replica's turn (``take_over``): a dead replica's operation interrupted once, its pending plan adopted."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from urllib.parse import parse_qs

from bot.slack.once import delivery_id
from commands.inventory import Approvals
from commands.operation import Origin
from commands.store import approvals, locks
from commands.store.db import AuditStore
from commands.store.deliveries import KEEP_S, claim, claim_in
from commands.store.leases import process_holder
from commands.store.locks import LockHolder
from commands.store.log import audit_log
from commands.store.recovery import take_over
from commands.vocabulary import PlanState
from tests.slack_fake.signing import slash_command_body
from tests.store_sql import rows

DEAD = "replica-b:1:x"  # another machine's replica: only its lease can tell it is gone


def command(trigger: str) -> dict[str, str]:
    form = parse_qs(slash_command_body("/verify", "ct129", "U1", "C1", "https://hooks.example/r/1", trigger).decode())
    return {key: values[0] for key, values in form.items()}


def test_a_delivery_is_keyed_by_its_event_id_or_its_whole_payload() -> None:
    assert delivery_id({"type": "event_callback", "event_id": "Ev1", "event": {}}) == ("event", "event:Ev1")
    first, again, other = command("1.T.a"), command("1.T.a"), command("2.T.b")
    assert delivery_id(first) == delivery_id(again) and delivery_id(first) != delivery_id(other)
    assert delivery_id(first)[0] == "command"  # type: ignore[index]
    click = {"type": "block_actions", "trigger_id": "3.T.c", "actions": [{"action_id": "restore_approve"}]}
    assert delivery_id(click) == delivery_id(json.loads(json.dumps(click)))
    assert delivery_id({"type": "url_verification", "challenge": "x"}) is None, "nothing to start: not claimed"
    assert delivery_id({"type": "block_suggestion"}) is None


async def test_a_delivery_is_claimed_once(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    try:
        assert await claim(store, "event:Ev1", "event") is True
        assert await claim(store, "event:Ev1", "event") is False, "a retry finds the claim"
        assert await claim(store, "event:Ev2", "event") is True
        later = await store.write(lambda db: claim_in(db, "event:Ev1", "event", now=10**10))
        assert later is True, f"a claim older than {KEEP_S:g} s is let go"
    finally:
        store.close()


async def running_on_b(store: AuditStore, operation_id: str, host: str, lease_expires: float) -> None:
    origin = Origin("slack:U1", "slack", "C1", "1.0")
    await audit_log(store, "restart", operation_id, host, "slack:U1").requested(origin)
    lock = LockHolder(host, operation_id, "restart", "slack:U1", 1, "replica-b", "2026-12-01T00:00:00Z",
                      lease_holder=DEAD, lease_expires=lease_expires)
    await store.write(lambda db: db.table("locks").insert(asdict(lock)))


async def test_a_dead_replicas_operation_is_interrupted_once_and_its_plan_adopted(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    try:
        await running_on_b(store, "op-dead", "ct129", time.time() - 1)
        await running_on_b(store, "op-live", "ct130", time.time() + 60)
        await approvals.create(store, plan_id="op-plan", operation="restore", host="ct131", requested_by="slack:U2",
                               plan_hash="h", details={}, approvals=Approvals(approvers=["U3"]))
        await store.write(lambda db: db.execute("UPDATE plans SET lease_holder = ?, lease_expires = ?",
                                                [DEAD, time.time() - 1]))
        interrupted, adopted = await take_over(store)
        assert [(op.operation_id, op.channel, op.thread_ts) for op in interrupted] == [("op-dead", "C1", "1.0")]
        assert [(plan["id"], plan["lease_holder"]) for plan in adopted] == [("op-plan", process_holder())]
        assert await take_over(store) == ([], []), "told once; a live lease is left to its holder"
        finished = rows(store_target, "SELECT operation_id, details FROM events WHERE kind = 'finished'")
        assert [(op, json.loads(details)["verdict"]) for op, details in finished] == [("op-dead", "interrupted")]
        assert [host for (host,) in rows(store_target, "SELECT host FROM locks ORDER BY host")] == ["ct130"]
        assert (await approvals.get(store, "op-plan")).state == PlanState.PENDING, "the adopted plan stays valid"
    finally:
        store.close()


async def test_the_replica_that_runs_an_approved_plan_holds_its_host_under_its_own_lease(
        store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    try:
        await running_on_b(store, "op-shown-by-b", "ct129", time.time() + 60)  # B showed the plan; A got the click
        lock = await locks.hold_for(store, "ct129", "op-shown-by-b", "restart", "slack:U3")
        [(holder, pid)] = rows(store_target, "SELECT lease_holder, pid FROM locks WHERE host = 'ct129'")
        assert lock.lease_holder == holder == process_holder() and pid == os.getpid()
    finally:
        store.close()


async def test_a_claim_does_not_wait_for_the_chains_writers(pg_url: str) -> None:
    """A delivery is claimed before its ack: it must not queue behind the audit log's appends (the chain's advisory
    lock, held here by another connection as a long append would) nor behind this store's own writes."""
    import asyncio

    import psycopg

    from commands.store.pg import WRITE_LOCK

    store = AuditStore.open(pg_url)
    try:
        with psycopg.connect(pg_url) as writer:
            writer.execute("SELECT pg_advisory_xact_lock(%s)", [WRITE_LOCK])  # held until this block ends
            appending = asyncio.ensure_future(store.write(lambda db: db.execute("SELECT 1")))  # queued behind it
            assert await asyncio.wait_for(claim(store, "event:EvBusy", "event"), 30) is True
            assert await asyncio.wait_for(claim(store, "event:EvBusy", "event"), 30) is False
            assert not appending.done(), "the chain's writers were held all along"
        await appending
    finally:
        store.close()
