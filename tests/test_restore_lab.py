"""Tiers 2 and 3: restore on real hosts, and every way it can go wrong leaving no half-written file."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import yaml

from commands.errors import PlanVoid
from commands.findings import Finding
from commands.inventory import Inventory, parse_inventory
from commands.operation import OperationResult, Origin
from commands.restore import RestorePlan, apply_restore, request_restore
from commands.store import approvals
from commands.store.db import AuditStore
from tests.conftest import run_cli, write_inventory
from tests.lab.common import BACKUP_DIR, LIVE_FILES, SPEC_DIR, BaseLab, LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsHost, NetnsLab
from tests.lab.nspawn import NspawnLab
from tests.lab.sysutil import cmdline
from tests.lab.waits import until

SEED = Scenario(patched=True, extra_file=True)
ORIGIN = Origin(actor="cli:tester", via="cli")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def host_sha(host: LabHost, path: str) -> str:
    return host.run(["sha256sum", "--", path]).stdout.split()[0]


@pytest.fixture(scope="module")
def netns_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {f"ct{n}": SEED for n in range(150, 158)}) as lab:
        yield lab


@pytest.fixture(scope="module")
def nspawn_lab() -> Iterator[NspawnLab]:
    with running_lab(NspawnLab, {"ct160": SEED}) as lab:
        yield lab


def inventory_of(lab: BaseLab) -> Inventory:
    return parse_inventory(yaml.safe_dump(lab.inventory()), "inventory.yml")


async def plan_and_approve(inventory: Inventory, name: str, audit: AuditStore
                           ) -> tuple[RestorePlan, approvals.PendingPlan]:
    plan = await request_restore(inventory, inventory.host(name), origin=ORIGIN, audit=audit)
    decided = await approvals.decide(audit, plan.operation_id, ORIGIN.actor, "approved", inventory.approvals)
    return plan, decided


async def approved_restore(inventory: Inventory, name: str, tmp_path: Path,
                           on_step: Callable[[Finding], Awaitable[None]] | None = None
                           ) -> tuple[RestorePlan, OperationResult]:
    """Plan, approve and apply a restore through the core, as the CLI does with --yes."""
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        plan, decided = await plan_and_approve(inventory, name, audit)
        result = await apply_restore(plan, decided, actor=ORIGIN.actor, audit=audit,
                                     move_extras=False, on_step=on_step)
    finally:
        audit.close()
    return plan, result


def assert_each_file_old_or_restored(host: LabHost, plan: RestorePlan) -> dict[str, str]:
    states = {}
    for change in plan.changes:
        now = host_sha(host, change.live_path)
        assert now in (change.live_sha, change.source_sha), f"{change.name} is half-written: {now}"
        states[change.name] = "restored" if now == change.source_sha else "as it was"
    leftovers = host.run(["sh", "-c", f"ls -a {SPEC_DIR} | grep proofbot || true"]).stdout
    assert leftovers == "", f"temp files left behind: {leftovers}"
    return states


async def restore_cli_succeeds(lab: BaseLab, host: LabHost, tmp_path: Path) -> None:
    pyc = host.local_path(f"{SPEC_DIR}/__pycache__/spec_info.cpython-312.pyc")
    pyc.parent.mkdir(exist_ok=True)
    pyc.write_bytes(b"stale bytecode")
    before = host.local_path(LIVE_FILES["spec_info.py"]).read_bytes()
    inventory = write_inventory(tmp_path / "inventory.yml", lab.inventory())
    db = str(tmp_path / "a.db")
    run = await run_cli("restore", host.name, "--yes", "--json", "--inventory", str(inventory), "--db", db)
    assert run.code == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["restored"] == ["spec_info.py"]
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["file:spec_info.py"] == "pass" and statuses["bytecode"] == "pass"
    assert statuses["stale-process"] == "warn", "the running service predates the restored file"
    backup = host.local_path(f"{BACKUP_DIR}/spec_info.py").read_bytes()
    assert host.local_path(LIVE_FILES["spec_info.py"]).read_bytes() == backup
    assert not pyc.exists()
    snapshot = report["snapshot_dir"]
    assert host.local_path(f"{snapshot}/spec_info.py").read_bytes() == before
    assert host.local_path(f"{snapshot}/bytecode/spec_info.cpython-312.pyc").read_bytes() == b"stale bytecode"
    mode = host.run(["stat", "-c", "%a %U", LIVE_FILES["spec_info.py"]]).stdout.split()
    assert mode == ["644", "root"]

    again = await run_cli("restore", host.name, "--json", "--inventory", str(inventory), "--db", db)
    assert again.code == 0, again.stdout + again.stderr  # nothing differs now: nothing to approve
    checks = {c["name"]: c for c in json.loads(again.stdout)["checks"]}
    assert set(checks) == {f"file:{name}" for name in LIVE_FILES}
    for name, live in LIVE_FILES.items():  # each file's own sha256sum, never another command's
        evidence = checks[f"file:{name}"]["evidence"]
        assert evidence["command"] == f"sha256sum -- {BACKUP_DIR}/{name} {live}", evidence
        assert checks[f"file:{name}"]["status"] == "pass"

    undo = await run_cli("restore", host.name, "--undo", snapshot, "--yes", "--json", "--inventory",
                         str(inventory), "--db", db)
    assert undo.code == 0, undo.stdout + undo.stderr
    assert host.local_path(LIVE_FILES["spec_info.py"]).read_bytes() == before
    assert json.loads(undo.stdout)["restored"] == ["spec_info.py"]


@pytest.mark.tier2
async def test_restore_and_undo_on_supervisord_host(netns_lab: NetnsLab, tmp_path: Path) -> None:
    await restore_cli_succeeds(netns_lab, netns_lab["ct150"], tmp_path)


@pytest.mark.tier3
async def test_restore_and_undo_on_systemd_host(nspawn_lab: NspawnLab, tmp_path: Path) -> None:
    await restore_cli_succeeds(nspawn_lab, nspawn_lab["ct160"], tmp_path)


@pytest.mark.tier2
async def test_file_changed_after_the_plan_voids_it_and_writes_nothing(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host, inventory = netns_lab["ct151"], inventory_of(netns_lab)
    audit = AuditStore.open(tmp_path / "a.db")
    plan, decided = await plan_and_approve(inventory, "ct151", audit)
    host.local_path(LIVE_FILES["spec_info.py"]).write_text("# edited by someone else meanwhile\n")
    with pytest.raises(PlanVoid, match=r"spec_info\.py") as void:
        await apply_restore(plan, decided, actor=ORIGIN.actor, audit=audit, move_extras=False)
    audit.close()
    assert void.value.exit_code == 4, "README: refused (plan void), exit 4"
    assert host.local_path(LIVE_FILES["spec_info.py"]).read_text() == "# edited by someone else meanwhile\n"
    assert not host.local_path(BACKUP_DIR + ".proofbot-snapshots").exists()


@pytest.mark.tier2
async def test_full_disk_during_replace_leaves_the_live_file_as_it_was(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host, inventory = netns_lab["ct152"], inventory_of(netns_lab)
    big = "x = 1\n" * 40_000  # 240 kB backup copy; the live dir gets a 64 kB tmpfs
    host.local_path(f"{BACKUP_DIR}/spec_info.py").write_text(big)
    files = {name: host.run(["cat", path]).stdout for name, path in LIVE_FILES.items() if "speculative" in path}
    host.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=755", "tmpfs", SPEC_DIR])
    try:
        for name, text in files.items():
            host.run(["tee", LIVE_FILES[name]], input=text)
        plan, result = await approved_restore(inventory, "ct152", tmp_path)
        replace = next(f for f in result.checks if f.name == "replace")
        assert result.verdict == "fail" and replace.status == "fail"
        assert "No space left on device" in (replace.evidence.output if replace.evidence else "")
        assert assert_each_file_old_or_restored(host, plan)["spec_info.py"] == "as it was"
        assert result.extra["restored"] == []
        assert result.extra["snapshot_dir"], "the snapshot is kept"
    finally:
        host.run(["umount", SPEC_DIR], check=False)


@pytest.mark.tier2
async def test_full_disk_for_the_snapshot_replaces_nothing(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host, inventory = netns_lab["ct153"], inventory_of(netns_lab)
    root = BACKUP_DIR + ".proofbot-snapshots"
    host.run(["mkdir", "-p", root])
    host.run(["mount", "-t", "tmpfs", "-o", "size=4k,nr_inodes=3", "tmpfs", root])
    try:
        audit = AuditStore.open(tmp_path / "a.db")
        plan, decided = await plan_and_approve(inventory, "ct153", audit)
        host.run(["sh", "-c", f"head -c 4096 /dev/zero > {root}/filler || true"])
        result = await apply_restore(plan, decided, actor=ORIGIN.actor, audit=audit,
                                     move_extras=False)
        audit.close()
        assert [f.name for f in result.checks][-1] == "snapshot"
        assert result.checks[-1].status == "fail" and "nothing replaced" in result.checks[-1].summary
        assert assert_each_file_old_or_restored(host, plan) == {"spec_info.py": "as it was"}
    finally:
        host.run(["umount", root], check=False)


@pytest.mark.tier2
async def test_read_only_live_dir_is_refused_cleanly(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host, inventory = netns_lab["ct154"], inventory_of(netns_lab)
    host.run(["mount", "--bind", SPEC_DIR, SPEC_DIR])
    host.run(["mount", "-o", "remount,bind,ro", SPEC_DIR])
    try:
        plan, result = await approved_restore(inventory, "ct154", tmp_path)
        replace = next(f for f in result.checks if f.name == "replace")
        assert replace.status == "fail" and "Read-only file system" in replace.summary
        assert assert_each_file_old_or_restored(host, plan) == {"spec_info.py": "as it was"}
        assert result.verdict == "fail"
    finally:
        host.run(["umount", SPEC_DIR], check=False)


@pytest.mark.tier2
async def test_copy_killed_mid_way_leaves_no_half_written_file(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host, inventory = netns_lab["ct155"], inventory_of(netns_lab)
    host.run(["sh", "-c", f"head -c 400000000 /dev/zero >> {BACKUP_DIR}/spec_info.py"])
    killers: list[asyncio.Task[subprocess.CompletedProcess[str]]] = []

    async def kill_the_copy(finding: Finding) -> None:
        if finding.name != "snapshot":
            return
        script = (f"for i in $(seq 400); do p=$(pgrep -f '^cat -- {BACKUP_DIR}/spec_info.py'); "
                  "if [ -n \"$p\" ]; then kill -9 $p; echo killed $p; exit 0; fi; sleep 0.01; done")
        killers.append(asyncio.create_task(asyncio.to_thread(host.run, ["sh", "-c", script])))

    plan, result = await approved_restore(inventory, "ct155", tmp_path, on_step=kill_the_copy)
    killed = [(await killer).stdout for killer in killers]
    assert killed and killed[0].startswith("killed"), "the copy finished before it could be killed"
    replace = next(f for f in result.checks if f.name == "replace")
    assert replace.status == "fail" and "stopped at `cat" in replace.summary
    assert assert_each_file_old_or_restored(host, plan) == {"spec_info.py": "as it was"}


@pytest.mark.tier2
async def test_link_dropped_during_replace_reports_what_it_knows(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host, inventory = netns_lab["ct156"], inventory_of(netns_lab)
    audit = AuditStore.open(tmp_path / "a.db")
    plan, decided = await plan_and_approve(inventory, "ct156", audit)
    drop = ["iptables", "-I", "INPUT", "-i", "eth0", "-j", "DROP"]

    async def cut_link(finding: Finding) -> None:
        if finding.name == "snapshot":
            await asyncio.to_thread(host.net_run, drop)

    try:
        result = await apply_restore(plan, decided, actor=ORIGIN.actor, audit=audit,
                                     move_extras=False, on_step=cut_link)
    finally:
        await asyncio.to_thread(host.net_run, ["iptables", "-D", "INPUT", "-i", "eth0", "-j", "DROP"], False)
        audit.close()
    names = {f.name: f for f in result.checks}
    assert names["apply"].status == "error" and "either as it was or fully restored" in names["apply"].summary
    assert names["reread"].status == "error"
    assert result.verdict == "error"
    assert result.extra["restored"] == []
    assert isinstance(host, NetnsHost) and host.cgroup is not None
    cgroup = host.cgroup

    def batch_ended() -> bool:  # it runs on past the drop on the host; its exit trap removes the temp file
        return not any(".proofbot-" in cmdline(pid) for pid in cgroup.pids())

    await until("the host-side replace batch ending", batch_ended, timeout_s=20)
    assert_each_file_old_or_restored(host, plan)


@pytest.mark.tier2
async def test_immutable_live_file_is_refused_and_left_as_it_was(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host, inventory = netns_lab["ct157"], inventory_of(netns_lab)
    await asyncio.to_thread(host.run, ["chattr", "+i", LIVE_FILES["spec_info.py"]])
    try:
        plan, result = await approved_restore(inventory, "ct157", tmp_path)
        replace = next(f for f in result.checks if f.name == "replace")
        assert replace.status == "fail" and "Operation not permitted" in replace.summary
        assert result.verdict == "fail" and result.extra["restored"] == []
        assert assert_each_file_old_or_restored(host, plan) == {"spec_info.py": "as it was"}
    finally:
        await asyncio.to_thread(host.run, ["chattr", "-i", LIVE_FILES["spec_info.py"]], False)
