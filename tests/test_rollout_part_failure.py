"""One part of a rolling restart batch fails to record (``CouldNotRecord``): its siblings are not cancelled. A
host whose restart was already sent is carried to its verdict; a host not yet sent is not sent (``NotSent``,
refused); the rollout is then interrupted with the first error, naming where each host stood.

The rollout's own code and store are real (SQLite); each host's single-host restart is a scripted stand-in (the
real one's gate, ``NotSent`` before anything is sent, is proven on a real host in tests/test_restart_not_sent.py),
so the three parts meet in the order that matters: one sent, one failing, one not yet sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.errors import CouldNotRecord
from commands.findings import Evidence, Finding
from commands.inventory import Inventory, parse_inventory
from commands.operation import OperationResult, Origin
from commands.restart import rollout
from commands.restart.act import Halt, NotSent
from commands.restart.plan import RestartPlan, ServiceSnapshot
from commands.restart.rollout import HostOutcome, RolloutPlan, apply_rollout
from commands.store import approvals
from commands.store.db import AuditStore
from commands.vocabulary import CheckStatus, Operation
from tests.lab.waits import until
from tests.store_sql import rows

NAMES = ["ct129", "ct130", "ct131"]  # failing, under way, not yet sent


def _inventory(tmp_path: Path) -> Inventory:
    known = tmp_path / "known_hosts"
    known.write_text("")
    service = {"manager": "supervisord", "unit": "sglang", "health_url": "http://127.0.0.1:30000/health"}
    return parse_inventory(yaml.safe_dump({
        "ssh": {"user": "root", "known_hosts": str(known), "client_keys": []},
        "approvals": {"approvers": ["U0APPROVER"]}, "groups": {"gpu-west": NAMES},
        "hosts": {name: {"address": "192.0.2.1", "service": service} for name in NAMES}}), "inventory.yml")


class Parts:
    """The stand-in for ``commands.restart.act.restart``: what each host's part did, in the order it did it."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.sent = asyncio.Event()

    async def restart(self, plan: RestartPlan, *, halt: Halt | None = None, **_: Any) -> OperationResult:
        name = plan.host.name
        if name == "ct130":  # sent at once; its watch goes on until after its sibling failed
            self.said.append("ct130 sent")
            self.sent.set()
            await until("a sibling failed", lambda: halt is not None and halt() is not None, interval_s=0.01)
            await asyncio.sleep(0.05)  # a cancellation sent with the failure would land here
            self.said.append("ct130 proven")
            return OperationResult(plan.operation_id, Operation.RESTART, name, "now", 0.1, [
                Finding("main_pid", CheckStatus.PASS, "new PID", Evidence.of("supervisorctl pid", 0, "2", 0.01))])
        await self.sent.wait()
        if name == "ct129":  # its step not taken by the database
            self.said.append("ct129 failed")
            raise CouldNotRecord("could not record in the audit database: injected")
        # ct131: its turn to send comes after
        await until("a sibling failed", lambda: halt is not None and halt() is not None, interval_s=0.01)
        assert halt is not None
        self.said.append("ct131 not sent")
        raise NotSent(f"not restarted: {halt()}")


async def test_a_part_that_cannot_record_cancels_no_sibling_and_starts_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = _inventory(tmp_path)
    plan = RolloutPlan("op-rollout", "gpu-west", 3, tuple(
        RestartPlan(f"op-{name}", inventory.hosts[name], ServiceSnapshot(4000 + i, True, "RUNNING"))
        for i, name in enumerate(NAMES)))
    parts = Parts()
    monkeypatch.setattr(rollout, "restart", parts.restart)

    async def reread(self: RolloutPlan, fleet: Any) -> None:  # the hosts are not real: nothing changed
        return None
    monkeypatch.setattr(RolloutPlan, "recheck", reread)
    done: list[HostOutcome] = []

    async def on_host_done(outcome: HostOutcome) -> None:
        done.append(outcome)

    db = tmp_path / "a.db"
    audit = AuditStore.open(db)
    try:
        await approvals.create(audit, plan_id=plan.operation_id, operation="rollout", host="gpu-west",
                               requested_by="alice@cli", plan_hash=plan.plan_hash, details=plan.to_json(),
                               approvals=inventory.approvals)
        decided = await approvals.decide(audit, plan.operation_id, "bob@cli", "approved", inventory.approvals)
        with pytest.raises(CouldNotRecord, match="injected"):
            await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet,
                                on_host_done=on_host_done)
    finally:
        audit.close()
    assert parts.said == ["ct130 sent", "ct129 failed", "ct131 not sent", "ct130 proven"], \
        "the restart under way was carried to its verdict, the one not yet sent never sent"
    assert {o.host: o.state for o in done} == {"ct130": "done", "ct131": "untouched"}
    assert "ct129's part of the rollout could not go on" in next(o.reason for o in done if o.host == "ct131")
    [(interrupted,)] = rows(db, "SELECT details FROM events WHERE kind = 'interrupted' "
                                "AND operation_id = 'op-rollout'")
    assert json.loads(interrupted)["outcomes"] == {"ct130": "done", "ct131": "untouched"}
    assert rows(db, "SELECT host FROM locks") == [], "every host of the group given back"
