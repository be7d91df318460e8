"""Tier 1: the hosts the watch keeps quiet about, read from the real audit store: a host whose lock proofbot
holds, and a host whose restart finished less than its ``ready_timeout_s`` ago; a verify changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.locks import acquire
from commands.store.log import audit_log
from commands.vocabulary import EventKind, Operation, Verdict
from commands.watch.holds import LockHolds

INVENTORY = parse_inventory("""
hosts:
  ct129:
    address: 10.0.0.1
    service: {manager: systemd, unit: sglang, health_url: "http://127.0.0.1:1/h", ready_timeout_s: 300}
  ct130:
    address: 10.0.0.2
    service: {manager: systemd, unit: sglang, health_url: "http://127.0.0.1:1/h", ready_timeout_s: 60}
  ct131: {address: 10.0.0.3}
""", "inv.yml")


async def test_a_finished_restart_holds_its_host_for_its_ready_time_and_a_lock_holds_while_held(
        tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    try:
        origin = Origin("U1", "cli")
        restart = audit_log(store, Operation.RESTART, "op-r", "ct129", "U1")
        await restart.requested(origin)
        ended = await restart.finished(Finished(Verdict.PASS))
        verify = audit_log(store, Operation.VERIFY, "op-v", "ct131", "U1")
        await verify.requested(origin)
        await verify.finished(Finished(Verdict.PASS))
        await acquire(store, "ct130", "op-x", Operation.RESTORE, "U1")
        assert ended.kind == EventKind.FINISHED
        finished_at = datetime.fromisoformat(ended.at.replace("Z", "+00:00"))
        holds = LockHolds(INVENTORY, store)
        now = finished_at + timedelta(seconds=10)
        assert await holds(["ct129", "ct130", "ct131"], now) == {
            "ct129": finished_at + timedelta(seconds=300), "ct130": now + timedelta(seconds=60)}
        # ready time over: ct129 is judged again; ct130's lock still holds it
        later = finished_at + timedelta(seconds=301)
        assert set(await holds(["ct129", "ct130", "ct131"], later)) == {"ct130"}
    finally:
        store.close()
