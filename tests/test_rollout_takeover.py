"""A dead replica's rolling restart, taken over by a live one (``take_over``, both backends): the rollout and its
host under way are finished interrupted once, the group's locks freed, and the rollout's ``finished`` event and
thread notice say where each host stood (restarted and proven, unknown, never reached), read from its plan and
its parts; the notice's words stay bounded for a big group."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import yaml

from bot.demo.host import demo_host
from bot.slack.audit_blocks import interrupted_message, rollout_states_words
from commands.inventory import Approvals, parse_inventory
from commands.operation import Origin
from commands.restart.act import restart
from commands.restart.plan import plan_restart
from commands.restart.rollout import apply_rollout, request_rollout
from commands.store import approvals, locks
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.locks import LockHolder
from commands.store.log import audit_log
from commands.store.recovery import rollout_states, take_over
from commands.vocabulary import Operation, PlanState, Verdict
from tests.store_sql import rows
from tests.test_replicas_store import DEAD

ORIGIN = Origin("slack:U1", "slack", "C1", "1.0")
PARTS = {"gpu1": "op-part-1", "gpu2": "op-part-2", "gpu3": "op-part-3", "gpu4": "op-part-4", "gpu5": "op-part-5"}


async def held_by_the_dead(store: AuditStore, host: str, operation_id: str, operation: str) -> None:
    lock = LockHolder(host, operation_id, operation, "slack:U1", 1, "replica-b", "2026-12-01T00:00:00Z",
                      lease_holder=DEAD, lease_expires=time.time() - 1)
    await store.write(lambda db: db.table("locks").insert(asdict(lock)))


async def a_dead_rollout(store: AuditStore) -> None:
    """gpu1 proven, gpu2 failed its proof, gpu3 refused (changed since the plan), gpu4 under way, gpu5 not reached."""
    await approvals.create(store, plan_id="op-rollout", operation=Operation.ROLLOUT, host="gpu-west",
                           requested_by="slack:U1", plan_hash="h", approvals=Approvals(approvers=["U3"]),
                           details={"hosts": [{"operation_id": op, "host": host} for host, op in PARTS.items()]})
    await store.write(lambda db: db.execute("UPDATE plans SET state = ?", [PlanState.APPROVED]))
    await audit_log(store, Operation.ROLLOUT, "op-rollout", None, "slack:U1").requested(
        ORIGIN, fleet={"target": "gpu-west", "hosts": list(PARTS)})
    for host, verdict in (("gpu1", Verdict.PASS), ("gpu2", Verdict.FAIL), ("gpu3", Verdict.REFUSED), ("gpu4", None)):
        part = audit_log(store, Operation.RESTART, PARTS[host], host, "slack:U1")
        await part.requested(ORIGIN, fleet_operation_id="op-rollout")
        if verdict is not None:
            await part.finished(Finished(verdict))
    await held_by_the_dead(store, "gpu4", PARTS["gpu4"], Operation.RESTART)
    await held_by_the_dead(store, "gpu5", "op-rollout", Operation.ROLLOUT)


async def test_a_dead_replicas_rollout_is_interrupted_once_saying_where_each_host_stood(
        store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    try:
        await a_dead_rollout(store)
        interrupted, _ = await take_over(store)
        assert sorted(op.operation_id for op in interrupted) == ["op-part-4", "op-rollout"]
        assert await take_over(store) == ([], []), "told once"
        assert rows(store_target, "SELECT host FROM locks") == [], "the group's locks are released"
        [rollout] = [op for op in interrupted if op.operation_id == "op-rollout"]
        assert rollout.hosts == (("gpu1", "done"), ("gpu2", "failed"), ("gpu3", "untouched"), ("gpu4", "unknown"),
                                 ("gpu5", "untouched"))
        [(details,)] = rows(store_target, "SELECT details FROM events WHERE kind = 'finished' "
                                          "AND operation_id = 'op-rollout'")
        ended = json.loads(details)
        assert ended["verdict"] == "interrupted"
        assert ended["counts"] == {"done": 1, "failed": 1, "unknown": 1, "untouched": 2}
        assert (ended["done"], ended["unknown"], ended["untouched"]) == (["gpu1"], ["gpu4"], ["gpu3", "gpu5"])
        text, blocks = interrupted_message(rollout)
        said = json.dumps(blocks)
        assert "rollout of gpu-west was interrupted" in text
        for words in ("gpu1: restarted and proven", "gpu2: restarted, its proof failed",
                      "gpu4: under way when it stopped, its state is unknown", "gpu3, gpu5: not reached"):
            assert words in said, said
    finally:
        store.close()


async def test_a_rollout_without_its_plan_is_still_interrupted(store_target: Path | str) -> None:
    """A rollout whose plan row is gone (nothing to read its parts from) is told without host states."""
    store = AuditStore.open(store_target)
    try:
        await a_dead_rollout(store)
        await store.write(lambda db: db.execute("DELETE FROM plans"))
        assert await store.snapshot(lambda db: rollout_states(db, "op-rollout")) == {}
        interrupted, _ = await take_over(store)
        [rollout] = [op for op in interrupted if op.operation_id == "op-rollout"]
        assert rollout.hosts == ()
        assert "marked interrupted" in json.dumps(interrupted_message(rollout)[1])
    finally:
        store.close()


async def test_a_lock_handed_to_a_part_that_never_started_is_freed_too(store_target: Path | str) -> None:
    """Killed between handing gpu5's lock to its part and the part's first event: no operation to interrupt holds
    the lock, and it is freed all the same (a lock released stale, naming the dead holder), not left until the next
    operation on gpu5 trips over it. A pending plan's lock, whose lease ended too, is adopted, not freed."""
    store = AuditStore.open(store_target)
    try:
        await a_dead_rollout(store)
        await store.write(lambda db: db.execute("UPDATE locks SET operation_id = ?, operation = ? WHERE host = ?",
                                                [PARTS["gpu5"], Operation.RESTART, "gpu5"]))
        await approvals.create(store, plan_id="op-plan", operation=Operation.RESTART, host="ct131", plan_hash="h",
                               requested_by="slack:U2", details={}, approvals=Approvals(approvers=["U3"]))
        await held_by_the_dead(store, "ct131", "op-plan", Operation.RESTART)
        await store.write(lambda db: db.execute("UPDATE plans SET lease_holder = ?, lease_expires = ? WHERE id = ?",
                                                [DEAD, time.time() - 1, "op-plan"]))
        interrupted, adopted = await take_over(store)
        assert sorted(op.operation_id for op in interrupted) == ["op-part-4", "op-rollout"]
        assert [plan["id"] for plan in adopted] == ["op-plan"]
        assert rows(store_target, "SELECT host, operation_id FROM locks") == [("ct131", "op-plan")]
        released = rows(store_target, "SELECT operation_id, host, details FROM events "
                                      "WHERE kind = 'lock-released-stale' AND host = 'gpu5'")
        assert [(op, host) for op, host, _ in released] == [(PARTS["gpu5"], "gpu5")]
        assert DEAD in released[0][2], "it names the holder whose lease ended"
        assert await take_over(store) == ([], []) and len(rows(store_target, "SELECT 1 FROM events WHERE kind = "
                                                                            "'lock-released-stale'")) == 2
    finally:
        store.close()


async def test_a_rollout_whose_last_host_finished_but_was_not_given_back_is_interrupted(
        store_target: Path | str) -> None:
    """Killed after its last host's part finished and before the rollout did: the host's lock, still the part's,
    leads to the rollout, which is interrupted (every host done), and the lock is freed."""
    store = AuditStore.open(store_target)
    try:
        await a_dead_rollout(store)
        await store.write(lambda db: db.execute("DELETE FROM locks"))
        for host in ("gpu4", "gpu5"):
            part = audit_log(store, Operation.RESTART, PARTS[host], host, "slack:U1")
            if host == "gpu5":
                await part.requested(ORIGIN, fleet_operation_id="op-rollout")
            await part.finished(Finished(Verdict.PASS))
        await held_by_the_dead(store, "gpu5", PARTS["gpu5"], Operation.RESTART)
        interrupted, _ = await take_over(store)
        [rollout] = interrupted
        assert rollout.operation_id == "op-rollout"
        assert dict(rollout.hosts) == {"gpu1": "done", "gpu2": "failed", "gpu3": "untouched", "gpu4": "done",
                                       "gpu5": "done"}
        assert rows(store_target, "SELECT host FROM locks") == []
    finally:
        store.close()


async def test_a_restart_and_a_rollout_hold_their_host_until_they_have_finished(tmp_path: Path) -> None:
    """A restart gives its host up only after its ``finished`` (its last checks are written, and told, while it
    holds it); a rollout's last batch's hosts go back to the rollout, freed after the rollout's ``finished``. At no
    moment is an operation left running with no lock, whose lease would tell a live replica that it died."""
    async with demo_host("gpu1", flags=["--speculative-algorithm", "NEXTN"]) as host:
        document = host.inventory()
        document["groups"] = {"gpu-west": ["gpu1"]}
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        held: list[str | None] = []

        async def holder() -> None:
            lock = await locks.holder_of(audit, "gpu1")
            held.append(lock.operation_id if lock else None)

        try:
            single = await plan_restart(inventory.hosts["gpu1"], operation_id="op-single")
            await restart(single, origin=Origin.local_user(), audit=audit, settle_s=0.5,
                          on_finding=lambda _: holder())
            assert held and set(held) == {"op-single"}, "its checks are told while it holds the host"
            assert await locks.holder_of(audit, "gpu1") is None
            held.clear()
            plan = await request_rollout(inventory, "gpu-west", origin=Origin.local_user(), audit=audit)
            decided = await approvals.decide(audit, plan.operation_id, "bob@cli", PlanState.APPROVED,
                                             inventory.approvals)
            result = await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit,
                                         fleet=inventory.fleet, on_host_done=lambda _: holder(), settle_s=0.5)
            assert result.named("done") == ["gpu1"]
            assert held == [plan.operation_id], "the last host's part gave it back to the rollout"
            assert await locks.holder_of(audit, "gpu1") is None, "freed once the rollout finished"
        finally:
            audit.close()


def test_a_big_groups_states_are_bounded() -> None:
    said = rollout_states_words([(f"gpu{n}", "untouched") for n in range(500)] + [("gpu-x", "unknown")], most=3)
    assert said == ("gpu-x: under way when it stopped, its state is unknown: verify it. "
                    "gpu0, gpu1, gpu2 and 497 more: not reached, never restarted. ")
