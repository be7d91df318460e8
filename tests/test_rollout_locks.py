"""A rolling restart takes every host's lock at apply, all or none: one busy host refuses it, naming the
holder, and the locks it had taken are given back (no host is contacted before that)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.errors import Locked, PlanVoid
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.plans import load_decided
from commands.restart.plan import RestartPlan, ServiceSnapshot
from commands.restart.rollout import RolloutPlan, apply_rollout
from commands.store import approvals, locks
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore
from tests.store_sql import rows

NAMES = ["ct129", "ct130", "ct131"]


def _document(tmp_path: Path) -> dict[str, Any]:
    known = tmp_path / "known_hosts"
    known.write_text("")
    service = {"manager": "supervisord", "unit": "sglang", "health_url": "http://127.0.0.1:30000/health"}
    return {"ssh": {"user": "root", "known_hosts": str(known), "client_keys": []},
            "approvals": {"approvers": ["U0APPROVER"]}, "groups": {"gpu-west": list(NAMES)},
            "hosts": {name: {"address": "192.0.2.1", "service": service} for name in NAMES}}


def _plan(inventory: Inventory) -> RolloutPlan:
    return RolloutPlan("op-rollout", "gpu-west", 1, tuple(
        RestartPlan(f"op-{name}", inventory.hosts[name], ServiceSnapshot(4000 + i, True, "RUNNING"))
        for i, name in enumerate(NAMES)))


async def _approved(audit: AuditStore, plan: RolloutPlan, inventory: Inventory) -> PendingPlan:
    await approvals.create(audit, plan_id=plan.operation_id, operation="rollout", host="gpu-west",
                           requested_by="alice@cli", plan_hash=plan.plan_hash, details=plan.to_json(),
                           approvals=inventory.approvals)
    return await approvals.decide(audit, plan.operation_id, "bob@cli", "approved", inventory.approvals)


async def test_one_busy_host_refuses_the_whole_rollout_and_frees_the_others(tmp_path: Path,
                                                                           store_target: Path | str) -> None:
    document = _document(tmp_path)
    inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
    plan = _plan(inventory)
    audit = AuditStore.open(store_target)
    try:
        decided = await _approved(audit, plan, inventory)
        await locks.acquire(audit, "ct130", "op-restore", "restore", "carol@cli")
        with pytest.raises(Locked) as busy:
            await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet)
    finally:
        audit.close()
    assert busy.value.message.startswith("ct130 is busy: restore op-restore by carol@cli since ")
    assert rows(store_target, "SELECT host, operation_id FROM locks") == [("ct130", "op-restore")]
    assert rows(store_target, "SELECT state FROM plans") == [("void",)]
    [(refused,)] = rows(store_target, "SELECT details FROM events WHERE kind = 'refused'")
    assert json.loads(refused)["holder"]["operation_id"] == "op-restore"
    [(finished,)] = rows(store_target, "SELECT details FROM events WHERE kind = 'finished'")
    assert json.loads(finished)["verdict"] == "refused"


async def test_an_approved_plan_void_against_today_s_inventory_is_ended_by_the_core(tmp_path: Path) -> None:
    """A host gone from the inventory between the approval and the apply: ``load_decided`` closes the plan
    void and finishes it refused, so no front-end has to."""
    document = _document(tmp_path)
    inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
    plan = _plan(inventory)
    del document["hosts"]["ct131"]
    document["groups"]["gpu-west"] = NAMES[:2]
    today = parse_inventory(yaml.safe_dump(document), "inventory.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        decided = await _approved(audit, plan, inventory)
        assert RolloutPlan.load(inventory, decided).plan_hash == plan.plan_hash  # as shown, it loads
        with pytest.raises(PlanVoid, match="ct131 is no longer in the inventory"):
            await load_decided(RolloutPlan, today, audit, decided)
    finally:
        audit.close()
    db = sqlite3.connect(tmp_path / "a.db")
    assert db.execute("SELECT state FROM plans").fetchall() == [("void",)]
    finished = json.loads(db.execute("SELECT details FROM events WHERE kind = 'finished'").fetchone()[0])
    assert finished["verdict"] == "refused" and "ct131" in finished["summary"]
