"""Tier 2: a rolling restart of a group of four namespace hosts (real OpenSSH + supervisord).

The third host's next start crash-loops (its launch script exits 1.5 s after start): hosts
1-2 are restarted and proven, 3 fails, 4 is never touched (its PID read on the host). A host
whose PID changes between the plan and the approval voids the whole plan; one that changes
after the rollout started halts it before that host.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commands.errors import PlanVoid
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.restart.rollout import apply_rollout, request_rollout
from commands.store import approvals
from commands.store.db import AuditStore
from tests.conftest import run_cli, write_inventory
from tests.lab.common import LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab

HOSTS = {"ct190": Scenario(), "ct191": Scenario(), "ct192": Scenario(launch_script=True), "ct193": Scenario()}
GROUP = list(HOSTS)


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, HOSTS) as made:
        yield made


def document(lab: NetnsLab, **fleet: Any) -> dict[str, Any]:
    doc = lab.inventory()
    doc["groups"] = {"gpu-west": GROUP}
    doc["fleet"] = {"restart_batch": 1, **fleet}
    return doc


async def pids(lab: NetnsLab) -> dict[str, int]:
    """Each host's main PID as its supervisorctl says, the four read side by side (each is a Python start)."""
    read = await asyncio.gather(*(asyncio.to_thread(lab[name].service_pid) for name in GROUP))
    return dict(zip(GROUP, read, strict=True))


def rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


async def approved_plan(lab: NetnsLab, tmp_path: Path) -> tuple[Any, Any, AuditStore, Any]:
    inventory = parse_inventory(json.dumps(document(lab)), "lab.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    plan = await request_rollout(inventory, "gpu-west", origin=Origin.local_user(), audit=audit)
    decided = await approvals.decide(audit, plan.operation_id, "alice@cli", "approved", inventory.approvals)
    return inventory, plan, audit, decided


@pytest.mark.tier2
async def test_without_yes_and_without_a_terminal_nothing_is_restarted(lab: NetnsLab, tmp_path: Path) -> None:
    before = await pids(lab)
    inventory = write_inventory(tmp_path / "inv.yml", document(lab))
    db = tmp_path / "a.db"
    run = await run_cli("restart", "gpu-west", "--inventory", str(inventory), "--db", str(db))
    assert run.code == 4, run.stderr
    assert "not restarted: no terminal to ask for confirmation on" in run.stderr
    assert "Rolling restart plan for gpu-west: 4 hosts, 1 at a time" in run.stdout
    assert await pids(lab) == before
    assert rows(db, "SELECT state FROM plans") == [("void",)]
    assert rows(db, "SELECT kind, host FROM events WHERE kind = 'refused'") == [("refused", None)]
    assert rows(db, "SELECT COUNT(*) FROM locks") == [(0,)]


@pytest.mark.tier2
async def test_a_pid_changed_between_plan_and_approval_voids_the_whole_plan(lab: NetnsLab, tmp_path: Path) -> None:
    before = await pids(lab)
    inventory, plan, audit, decided = await approved_plan(lab, tmp_path)
    assert [p.before.main_pid for p in plan.hosts] == [before[name] for name in GROUP]
    await asyncio.to_thread(lab["ct191"].run, ["supervisorctl", "restart", "sglang"])
    changed = await pids(lab)
    assert changed["ct191"] != before["ct191"]
    try:
        with pytest.raises(PlanVoid) as void:
            await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet)
    finally:
        audit.close()
    assert "plan void, nothing restarted: 1 host(s) changed since the plan: ct191: main PID" in void.value.message
    assert await pids(lab) == changed  # nobody restarted
    db = tmp_path / "a.db"
    assert rows(db, "SELECT COUNT(*) FROM locks") == [(0,)]
    assert rows(db, "SELECT state FROM plans") == [("void",)]
    assert rows(db, "SELECT COUNT(*) FROM events WHERE operation = 'restart'") == [(0,)]
    assert rows(db, "SELECT json_extract(details, '$.verdict') FROM events WHERE kind = 'finished'") == [("refused",)]


@pytest.mark.tier2
async def test_a_host_changed_after_the_rollout_began_halts_it_before_that_host(lab: NetnsLab, tmp_path: Path) -> None:
    before = await pids(lab)
    inventory, plan, audit, decided = await approved_plan(lab, tmp_path)

    async def started(host: str, batch: int, batches: int) -> None:
        if host == "ct190":  # someone restarts ct191 while ct190, the first batch, is being restarted
            await asyncio.to_thread(lab["ct191"].run, ["supervisorctl", "restart", "sglang"])

    try:
        result = await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet,
                                     on_host_start=started, settle_s=0.5)
    finally:
        audit.close()
    after = await pids(lab)
    assert (result.named("done"), result.named("failed"), result.named("untouched")) == (
        ["ct190"], [], ["ct191", "ct192", "ct193"])
    assert result.verdict == "refused"
    assert "ct191 changed since the plan: main PID" in result.hosts[1].reason
    assert after["ct190"] not in (before["ct190"], 0)
    assert (after["ct192"], after["ct193"]) == (before["ct192"], before["ct193"])
    assert rows(tmp_path / "a.db", "SELECT COUNT(*) FROM locks") == [(0,)]


@pytest.mark.tier2
async def test_rolling_restart_halts_at_the_crash_looping_third_host(lab: NetnsLab, tmp_path: Path) -> None:
    crashing = lab["ct192"]
    inventory = write_inventory(tmp_path / "inv.yml", document(lab))
    db = tmp_path / "a.db"
    before = await pids(lab)
    crashing.set_next_start(Scenario(exit_after_s=1.5))
    try:
        run = await run_cli("restart", "gpu-west", "--yes", "--json", "--inventory", str(inventory), "--db", str(db))
    finally:
        crashing.set_next_start(Scenario())
    after = await pids(lab)
    assert run.code == 1, run.stderr
    out = json.loads(run.stdout)
    assert (out["operation"], out["target"], out["verdict"]) == ("restart", "gpu-west", "fail")
    assert (out["done"], out["failed"], out["untouched"]) == (["ct190", "ct191"], ["ct192"], ["ct193"])
    by_host = {host["host"]: host for host in out["hosts"]}
    for name in ("ct190", "ct191"):  # restarted and proven: the new PIDs are the ones running now
        assert by_host[name]["verdict"] == "pass"
        assert by_host[name]["old_pid"] == before[name]
        assert by_host[name]["new_pid"] == after[name] != before[name]
    crashed = {check["name"]: check for check in by_host["ct192"]["checks"]}
    assert crashed["main-pid"]["status"] == "fail"
    # Two truthful ways, by when the polls fell in its cycle: two new PIDs seen (a crash loop), or one new PID and
    # supervisord restarting or giving up on it when the watch ended (a loaded machine polls less often).
    ways = (r"crash loop: the main PID changed "
            r"|PID \d+ → \d+ seen, but sglang is (STARTING|BACKOFF|EXITED|FATAL) at the end")
    assert re.match(ways, crashed["main-pid"]["summary"]), crashed["main-pid"]["summary"]
    assert after["ct193"] == before["ct193"]  # untouched, read on the host
    assert by_host["ct193"]["verdict"] is None and by_host["ct193"]["rollout_state"] == "untouched"
    assert "halted after batch 3 of 4: ct192 failed its proof" in out["halted"]
    # The plan was shown once with every host's PID; progress went to stderr, one line per host start and end.
    for name in GROUP:
        assert f"PID {before[name]}" in run.stderr
    assert run.stderr.count("restarting…") == 3
    # Audit: each host's restart is its own operation, linked to the rollout; ct193 has none.
    rollout = out["operation_id"]
    linked = rows(db, "SELECT host FROM events WHERE kind = 'requested' AND operation = 'restart' "
                      "AND json_extract(details, '$.fleet_operation_id') = ? ORDER BY id", rollout)
    assert linked == [("ct190",), ("ct191",), ("ct192",)]
    finished = json.loads(rows(db, "SELECT details FROM events WHERE operation_id = ? AND kind = 'finished'",
                               rollout)[0][0])
    assert finished["counts"] == {"done": 2, "failed": 1, "untouched": 1}
    assert rows(db, "SELECT COUNT(*) FROM locks") == [(0,)]


@pytest.mark.tier2
async def test_in_a_batch_of_two_the_rest_of_the_failing_batch_finishes(lab: NetnsLab, tmp_path: Path) -> None:
    """Batches [ct190, ct191], [ct192, ct193]: ct192 crash-loops, ct193 beside it is still restarted and proven."""
    crashing = lab["ct192"]
    await settled(crashing)
    doc = document(lab, restart_batch=2)
    inventory = parse_inventory(json.dumps(doc), "lab.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    before = await pids(lab)
    crashing.set_next_start(Scenario(exit_after_s=1.5))
    try:
        plan = await request_rollout(inventory, "gpu-west", origin=Origin.local_user(), audit=audit)
        assert [[p.host.name for p in batch] for batch in plan.batches()] == [["ct190", "ct191"], ["ct192", "ct193"]]
        decided = await approvals.decide(audit, plan.operation_id, "alice@cli", "approved", inventory.approvals)
        result = await apply_rollout(plan, decided, origin=Origin.local_user(), audit=audit, fleet=inventory.fleet)
    finally:
        crashing.set_next_start(Scenario())
        audit.close()
    after = await pids(lab)
    assert (result.named("done"), result.named("failed"), result.named("untouched")) == (
        ["ct190", "ct191", "ct193"], ["ct192"], [])
    assert result.verdict == "fail"
    assert result.halted == ("halted after batch 2 of 2: ct192 failed its proof; "
                             "the rest of that batch finished (ct193)")
    assert all(after[name] not in (before[name], 0) for name in ("ct190", "ct191", "ct193"))


async def settled(host: LabHost) -> None:
    """The crash-looping host of an earlier test back to one steady, healthy process."""
    deadline = time.monotonic() + 60
    seen: list[int] = []
    while len(seen) < 3 or len(set(seen[-3:])) != 1 or seen[-1] == 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"{host.name} did not settle: PIDs {seen}")
        seen.append(await asyncio.to_thread(host.service_pid))
        await asyncio.sleep(1.0)
    assert await asyncio.to_thread(host.health) == 200
