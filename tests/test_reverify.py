"""Tier 1: re-verify from the core (``commands.verify.reverify``), no front-end: the hosts of a fleet verify
that did not pass, read from the audit log, planned again against today's inventory, and run as a new fleet."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
from pathlib import Path

import pytest

from bot.demo.host import DemoHost
from commands.errors import Refused
from commands.inventory import load_inventory, parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.recovery import recover
from commands.verify.fleet import verify_fleet
from commands.verify.reverify import reverify_request
from tests.audit_events import raw_append
from tests.conftest import run_cli
from tests.fleet_rig import fleet_document, fleet_entry


async def test_reverify_runs_only_the_hosts_that_did_not_pass(seeded_host: DemoHost, clean_host: DemoHost,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "inventory.yml"
    hosts = {"ct129": fleet_entry(seeded_host), "ct130": fleet_entry(clean_host), "ct131": fleet_entry(clean_host)}
    path.write_text(fleet_document(hosts, clean_host))
    first = await run_cli("verify", "gpu-west", "--json", "--inventory", str(path), "--db", str(tmp_path / "a.db"))
    assert first.code == 1, first.stderr
    fleet_id = json.loads(first.stdout)["operation_id"]
    inventory = load_inventory(path)
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        request = await reverify_request(inventory, audit, fleet_id)
        assert request.target == f"the 1 not passing in {fleet_id}"
        assert [plan.host.name for plan in request.plan.plans] == ["ct129"]
        again = await verify_fleet(request.plan.plans, target=request.target, origin=Origin.local_user(),
                                   audit=audit, fleet=inventory.fleet, operation_id=request.operation_id)
        with pytest.raises(Refused, match="is not a fleet verify"):  # a host's own verify is not a fleet
            await reverify_request(inventory, audit, again.results[0].operation_id)
    finally:
        audit.close()
    assert (again.operation_id, again.verdict, [r.host for r in again.results]) == (
        request.operation_id, "fail", ["ct129"])
    with sqlite3.connect(tmp_path / "a.db") as db:
        (asked,) = db.execute("SELECT json_extract(details, '$.fleet.hosts') FROM events WHERE kind = 'requested' "
                              "AND operation_id = ?", [request.operation_id]).fetchone()
    assert json.loads(asked) == ["ct129"]


async def test_reverify_plans_each_host_with_the_backup_it_compared_as_today_s_inventory_has_it(
        tmp_path: Path) -> None:
    """ct130 compared pre-b (still there), ct131's pre-c was removed since (verified without files, said),
    ct132 is gone from the inventory (left out, said), ct129 passed (not asked again)."""
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()  # the process that ran the fleet, certainly ended
    origin = {"actor": "cli:ops", "via": "cli",
              "process": {"machine": socket.gethostname(), "pid": gone.pid, "started": None}}
    backup = {"dir": "/root/backup", "files": {"a.py": "/srv/a.py"}}
    inventory = parse_inventory(json.dumps({"hosts": {
        "ct129": {"address": "192.0.2.1"},
        "ct130": {"address": "192.0.2.2", "backups": {"pre-b": backup, "other": backup}},
        "ct131": {"address": "192.0.2.3", "backups": {"other": backup}}}}), "inventory.yml")
    store = AuditStore.open(tmp_path / "a.db")
    try:
        await raw_append(store, "requested", operation_id="op-fleet", operation="verify", host=None, actor="cli:ops",
                           details={"fleet": {"target": "gpu-west", "hosts": ["ct129", "ct130", "ct131", "ct132"],
                                              "backups": {"ct130": "pre-b", "ct131": "pre-c", "ct132": None}},
                                    "origin": origin})
        for host, compared in (("ct129", None), ("ct130", "pre-b")):
            await raw_append(store, "requested", operation_id=f"op-{host}", operation="verify", host=host,
                               actor="cli:ops", details={"fleet_operation_id": "op-fleet", "backup": compared,
                                                         "origin": origin})
        await raw_append(store, "finished", operation_id="op-ct129", operation="verify", host="ct129", actor="cli:ops",
                           details={"verdict": "pass"})
        await recover(store)  # the fleet was interrupted: ct130 cut off, ct131 and ct132 never started
        request = await reverify_request(inventory, store, "op-fleet")
    finally:
        store.close()
    assert request.target == "the 2 not passing in op-fleet (1 no longer in the inventory)"
    assert [(plan.host.name, plan.backup_name) for plan in request.plan.plans] == [("ct130", "pre-b"),
                                                                                  ("ct131", None)]
    assert request.plan.without_backup == {"ct131": "no backup pre-c any more"}
