"""Tier 1: restart against the loopback host (real supervisord, in-process SSH server): API, CLI, lock, faults."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, demo_host
from commands.errors import Locked, PlanVoid
from commands.inventory import Host, parse_inventory
from commands.operation import Origin
from commands.restart import RestartProgress, plan_restart, restart
from commands.store import locks
from commands.store.db import AuditStore
from tests.conftest import run_cli, via_port, write_inventory
from tests.lab.proxy import DelayProxy
from tests.lab.sysutil import pid_alive
from tests.lab.waits import until

GOOD_FLAGS = ["--speculative-algorithm", "NEXTN"]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def lab() -> AsyncIterator[DemoHost]:
    async with demo_host("ct150", patched=False, extra_file=False, flags=GOOD_FLAGS) as host:
        yield host


def inventory_host(lab: DemoHost, **service: Any) -> Host:
    return parse_inventory(yaml.safe_dump(lab.inventory(**service)), "t.yml").host(lab.name)


async def supervised_pid(lab: DemoHost) -> int:
    return int((await lab.supervisorctl("pid", "sglang")).strip())


async def test_restart_proves_a_new_pid_and_records_every_step(lab: DemoHost, tmp_path: Path) -> None:
    old = await supervised_pid(lab)
    plan = await plan_restart(inventory_host(lab))
    assert plan.before.main_pid == old and plan.before.cmdline and "NEXTN" in plan.before.cmdline
    audit = AuditStore.open(tmp_path / "a.db")
    seen: list[RestartProgress] = []

    async def record(progress: RestartProgress) -> None:
        seen.append(progress)

    result = await restart(plan, origin=Origin.local_user(), audit=audit, on_progress=record, settle_s=1.0)
    audit.close()
    assert result.verdict == "pass", [f.to_json() for f in result.checks if f.status != "pass"]
    new = await supervised_pid(lab)
    assert new != old
    assert (result.extra["old_pid"], result.extra["new_pid"]) == (old, new)
    assert result.extra["ready_after_s"] >= 1.0  # never before supervisord's startsecs=1 (latency: bench/)
    assert [f.name for f in result.checks] == ["restart-command", "main-pid", "health", "cmdline", "probe",
                                               "ready-time"]
    assert result.stats["connections"] == 1
    phases = [p.phase for p in seen]
    # The first two and the last are always delivered; in between the newest state wins, so
    # "probing" may be skipped on a busy machine: the audit log says the probe went out.
    assert phases[:2] == ["before", "restarting"] and phases[-1] == "done"
    assert any(p.pid_changed and p.current_pid == new for p in seen)
    kinds = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute(
        "SELECT kind FROM events WHERE operation_id = ? ORDER BY id", (plan.operation_id,))]
    assert kinds[0] == "requested" and kinds[-1] == "finished"
    assert kinds.count("check") == 6 and "step" in kinds
    steps = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute(
        "SELECT json_extract(details, '$.step') FROM events WHERE operation_id = ? AND kind = 'step'",
        (plan.operation_id,))]
    assert steps.index("ready") < steps.index("probe-sent") < steps.index("probe-answered")


async def test_cli_without_yes_and_without_a_terminal_changes_nothing_exit_4(lab: DemoHost, tmp_path: Path) -> None:
    old = await supervised_pid(lab)
    inventory = write_inventory(tmp_path / "inv.yml", lab.inventory())
    run = await run_cli("restart", lab.name, "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 4, run.stdout + run.stderr
    assert "no terminal to ask for confirmation on" in run.stderr and "--yes" in run.stderr
    assert f"PID {old}" in run.stdout  # the plan was shown
    assert await supervised_pid(lab) == old
    kinds = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute("SELECT kind FROM events ORDER BY id")]
    assert kinds == ["requested", "plan-shown", "refused"]


async def test_cli_yes_json_adds_old_and_new_pid_and_ready_time(lab: DemoHost, tmp_path: Path,
                                                               store_target: Path | str) -> None:
    old = await supervised_pid(lab)
    inventory = write_inventory(tmp_path / "inv.yml", lab.inventory())
    run = await run_cli("restart", lab.name, "--yes", "--json", "--inventory", str(inventory),
                        "--db", str(store_target))  # a SQLite file, then a PostgreSQL URL
    assert run.code == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["operation"] == "restart" and report["verdict"] == "pass"
    assert report["old_pid"] == old and report["new_pid"] == await supervised_pid(lab) != old
    assert isinstance(report["ready_after_s"], float)
    assert "Restart plan for ct150" in run.stderr  # the plan goes to stderr when stdout is JSON


async def test_a_second_restart_of_the_same_host_is_refused_by_the_lock(lab: DemoHost, tmp_path: Path) -> None:
    audit = AuditStore.open(tmp_path / "a.db")
    first_plan = await plan_restart(inventory_host(lab))
    started = asyncio.Event()

    async def note(progress: RestartProgress) -> None:
        if progress.phase == "restarting":
            started.set()

    first = asyncio.create_task(restart(first_plan, origin=Origin("slack:U1", "slack", "C1", "1.2"), audit=audit,
                                        on_progress=note, settle_s=0.5))
    await asyncio.wait_for(started.wait(), 10)
    second_plan = await plan_restart(inventory_host(lab))
    with pytest.raises(Locked) as refused:
        await restart(second_plan, origin=Origin.local_user(), audit=audit)
    assert refused.value.exit_code == 4
    assert f"restart {first_plan.operation_id} by slack:U1" in refused.value.message
    assert refused.value.holder["thread_ts"] == "1.2"
    assert (await first).verdict == "pass"
    audit.close()


async def test_a_lock_taken_for_this_plan_while_it_awaited_approval_is_reused(lab: DemoHost, tmp_path: Path) -> None:
    audit = AuditStore.open(tmp_path / "a.db")
    plan = await plan_restart(inventory_host(lab))
    await locks.acquire(audit, lab.name, plan.operation_id, "restart", "slack:U1", "C1", "1.2")
    result = await restart(plan, origin=Origin("slack:U2", "slack", "C1", "1.2"), audit=audit,
                           request_recorded=True, settle_s=0.5)
    assert result.verdict == "pass"
    assert await locks.holder_of(audit, lab.name) is None
    audit.close()


async def test_a_plan_is_void_when_the_process_changed_since(lab: DemoHost, tmp_path: Path) -> None:
    plan = await plan_restart(inventory_host(lab))
    await lab.supervisorctl("restart", "sglang")  # someone else restarted it after the plan was shown
    moved = await supervised_pid(lab)
    audit = AuditStore.open(tmp_path / "a.db")
    with pytest.raises(PlanVoid, match=f"main PID {plan.before.main_pid} → {moved}"):
        await restart(plan, origin=Origin.local_user(), audit=audit)
    audit.close()
    assert await supervised_pid(lab) == moved
    kinds = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute("SELECT kind FROM events ORDER BY id")]
    assert kinds == ["requested", "refused"]


async def test_a_plan_is_void_when_its_pid_now_belongs_to_a_younger_process(lab: DemoHost, tmp_path: Path) -> None:
    plan = await plan_restart(inventory_host(lab))
    assert plan.before.main_pid == await supervised_pid(lab) and plan.before.started_epoch is not None
    # The host really runs a process with the planned PID, started when /proc says. The plan remembers a
    # process with that PID started an hour earlier: the plan of a process that died and whose PID was
    # reused by a younger one (the manager and the PID alone cannot tell them apart).
    earlier = plan.before.started_epoch - 3600
    reused = dataclasses.replace(plan, before=dataclasses.replace(
        plan.before, started_epoch=earlier,
        started_at=datetime.fromtimestamp(earlier, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")))
    audit = AuditStore.open(tmp_path / "a.db")
    with pytest.raises(PlanVoid, match=f"PID {plan.before.main_pid} now belongs to a process started") as void:
        await restart(reused, origin=Origin.local_user(), audit=audit)
    audit.close()
    assert void.value.exit_code == 4 and "main PID" not in void.value.message
    assert await supervised_pid(lab) == plan.before.main_pid, "nothing was restarted"
    kinds = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute("SELECT kind FROM events ORDER BY id")]
    assert kinds == ["requested", "refused"]


async def test_link_blackholed_right_after_the_restart_command_is_an_error(lab: DemoHost, tmp_path: Path) -> None:
    old = await supervised_pid(lab)
    async with DelayProxy("127.0.0.1", lab.ssh_port) as proxy:
        document = via_port(lab, proxy.port, tmp_path)
        plan = await plan_restart(parse_inventory(yaml.safe_dump(document), "t.yml").host(lab.name))
        audit = AuditStore.open(tmp_path / "a.db")

        cutter: list[asyncio.Task[None]] = []

        async def blackhole_once_the_old_process_is_stopped() -> None:
            # Evidence that the command reached the host: supervisorctl stopped the old process.
            # Its answer comes only after the new one ran startsecs=1, so that answer is lost.
            await until(f"the restart command stopping PID {old}", lambda: not pid_alive(old), timeout_s=20)
            proxy.blackhole()

        async def cut(progress: RestartProgress) -> None:
            if progress.phase == "restarting" and not cutter:
                cutter.append(asyncio.create_task(blackhole_once_the_old_process_is_stopped()))

        result = await restart(plan, origin=Origin.local_user(), audit=audit, on_progress=cut)
        await asyncio.gather(*cutter)
        audit.close()
    statuses = {f.name: f.status for f in result.checks}
    assert result.verdict == "error", statuses
    assert statuses["restart-command"] == "error" and "pass" not in (statuses["main-pid"], statuses["ready-time"])
    assert "whether it ran is unknown" in result.checks[0].summary
    assert result.extra["ready_after_s"] is None
    for _ in range(40):  # the command did reach the host: it restarted there, unseen by proofbot
        if await supervised_pid(lab) not in (old, 0):
            break
        await asyncio.sleep(0.25)
    assert await supervised_pid(lab) != old


async def test_a_service_that_comes_back_with_a_forbidden_flag_fails(tmp_path: Path) -> None:
    async with demo_host("ct151", patched=False, extra_file=False, flags=[*GOOD_FLAGS, "--enable-ddtree"]) as lab:
        plan = await plan_restart(inventory_host(lab))
        audit = AuditStore.open(tmp_path / "a.db")
        result = await restart(plan, origin=Origin.local_user(), audit=audit, settle_s=0.5)
        audit.close()
    checks = {f.name: f for f in result.checks}
    assert result.verdict == "fail"
    assert checks["main-pid"].status == "pass" and checks["health"].status == "pass"
    assert checks["cmdline"].summary.startswith("health answers 200 but --enable-ddtree is present in new PID")
    assert checks["cmdline"].summary.endswith("the old launch script is still in place")
    assert result.extra["ready_after_s"] is None and result.extra["new_pid"] is not None
