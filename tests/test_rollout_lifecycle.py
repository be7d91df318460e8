"""Tier 1: a rolling restart through the one approval lifecycle, over two loopback hosts (each its own
supervisord): admitted, planned, approved, rebuilt from its stored row as a click rebuilds it, applied.

Each host's service is read once when planned and once when applied (counted on the SSH boundary: every
exec that reads the main process's start time), and a host changed between the plan and the approval
refuses the plan, naming that host, with nothing restarted.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.demo.host import DemoHost, demo_host
from commands.errors import PlanVoid, Refused
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.restart.operation import admit_restart
from commands.restart.rollout import RolloutPlan, RolloutResult, apply_rollout, request_rollout
from commands.ssh import HostConnection
from commands.store import approvals
from commands.store.db import AuditStore
from commands.vocabulary import Operation, PlanState

NAMES = ["ct129", "ct130"]
START_TIME_READ = ["getconf", "CLK_TCK"]  # only a full read of the service asks for it (``read_snapshot``)


@asynccontextmanager
async def group(tmp_path: Path, restart_batch: int) -> AsyncIterator[tuple[Inventory, AuditStore, list[DemoHost]]]:
    async with AsyncExitStack() as stack:
        hosts = [await stack.enter_async_context(demo_host(name, flags=["--speculative-algorithm", "NEXTN"]))
                 for name in NAMES]
        document = hosts[0].inventory()
        document["hosts"] = {}
        for host in hosts:
            entry: dict[str, Any] = host.inventory()["hosts"][host.name]
            entry["ssh"] = {"known_hosts": str(host.known_hosts), "client_keys": [str(host.client_key)]}
            document["hosts"][host.name] = entry
        document["groups"] = {"gpu-west": NAMES}
        document["fleet"] = {"restart_batch": restart_batch}
        audit = AuditStore.open(tmp_path / "a.db")
        stack.callback(audit.close)
        yield parse_inventory(yaml.safe_dump(document), "inventory.yml"), audit, hosts


async def _pid(host: DemoHost) -> int:
    return int((await host.supervisorctl("pid", "sglang")).strip())


def count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every full read of a host's service, per host, as it goes over SSH (the real exec still runs)."""
    reads: Counter[str] = Counter()
    real = HostConnection.run_batch

    async def counted(self: HostConnection, commands: Sequence[Any], **kwargs: Any) -> Any:
        if any(list(step) == START_TIME_READ for step in commands if isinstance(step, (list, tuple))):
            reads[self.host.name] += 1
        return await real(self, commands, **kwargs)

    monkeypatch.setattr(HostConnection, "run_batch", counted)
    return reads


async def planned_and_approved(inventory: Inventory, audit: AuditStore) -> tuple[RolloutPlan, Any]:
    """The plan as a Slack click gets it: decided, then rebuilt from the stored row against the inventory."""
    request = await admit_restart(inventory, "gpu-west", audit)
    assert (request.operation, request.hosts) == (Operation.ROLLOUT, tuple(NAMES))
    shown = await request_rollout(inventory, request, origin=Origin.local_user(), audit=audit)
    decided = await approvals.decide(audit, shown.operation_id, "bob@cli", PlanState.APPROVED, inventory.approvals)
    plan = RolloutPlan.load(inventory, decided)
    assert plan.plan_hash == shown.plan_hash
    return plan, decided


async def test_one_batch_reads_each_host_once_to_plan_and_once_to_apply(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = count_reads(monkeypatch)
    async with group(tmp_path, restart_batch=2) as (inventory, audit, hosts):
        before = [await _pid(host) for host in hosts]
        plan, decided = await planned_and_approved(inventory, audit)
        assert reads == Counter(dict.fromkeys(NAMES, 1))  # planned: one read each
        result = await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet,
                                     settle_s=0.5)
        after = [await _pid(host) for host in hosts]
    assert isinstance(result, RolloutResult) and result.verdict == "pass", result.to_json()
    assert all(new != old for new, old in zip(after, before, strict=True))
    assert reads == Counter(dict.fromkeys(NAMES, 2)), reads  # and one more each when applied, not two


async def test_a_later_batch_is_read_again_just_before_its_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of one: the first host restarts on the apply's read; the second, restarted later, is read
    again just before (a host changed meanwhile is left untouched: tests/test_rollout_lab.py)."""
    reads = count_reads(monkeypatch)
    async with group(tmp_path, restart_batch=1) as (inventory, audit, _hosts):
        plan, decided = await planned_and_approved(inventory, audit)
        result = await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet,
                                     settle_s=0.5)
    assert result.verdict == "pass", result.to_json()
    assert reads == Counter({"ct129": 2, "ct130": 3}), reads


async def test_a_host_changed_since_the_plan_refuses_the_approved_rollout_naming_it(tmp_path: Path) -> None:
    async with group(tmp_path, restart_batch=1) as (inventory, audit, hosts):
        plan, decided = await planned_and_approved(inventory, audit)
        await hosts[1].supervisorctl("restart", "sglang")  # ct130, by hand, after the plan was shown
        changed = [await _pid(host) for host in hosts]
        assert changed[1] != plan.hosts[1].before.main_pid
        with pytest.raises(PlanVoid) as void:
            await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet)
        assert [await _pid(host) for host in hosts] == changed  # nothing restarted
        with pytest.raises(Refused, match="is not approved"):  # the plan is closed: a second apply is refused
            await apply_rollout(plan, await approvals.get(audit, plan.operation_id), origin=Origin.local_user(),
                                audit=audit, fleet=inventory.fleet)
    assert "plan void, nothing restarted: 1 host(s) changed since the plan: ct130: main PID" in void.value.message
    with sqlite3.connect(tmp_path / "a.db") as db:
        assert db.execute("SELECT state FROM plans").fetchall() == [("void",)]
        assert db.execute("SELECT COUNT(*) FROM locks").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM events WHERE operation = 'restart'").fetchone() == (0,)
        ends = db.execute("SELECT kind, json_extract(details, '$.verdict') FROM events WHERE operation = 'rollout' "
                          "AND kind IN ('refused', 'finished') ORDER BY id").fetchall()
    assert ends == [("refused", None), ("finished", "refused")]
