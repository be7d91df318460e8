"""Tier 2 faults that strike mid-operation, on real OpenSSH hosts: the host's key rotated between
an approved plan and its apply, and sshd killed in the middle of a verify. Each must end with no
false pass, nothing half-written and no lock left behind."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.restore import apply_restore, request_restore
from commands.store import approvals
from commands.store.db import AuditStore
from commands.store.recovery import recover
from commands.verify import VerifyPlan, verify
from tests.conftest import REPO, write_inventory
from tests.lab.common import BACKUP_DIR, SPEC_DIR, LabHost, Scenario, make_keypair
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsHost, NetnsLab
from tests.lab.waits import until

ORIGIN = Origin(actor="cli:tester", via="cli")


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct180": Scenario(patched=True), "ct181": Scenario(hang=True),
                                "ct182": Scenario(patched=True)}) as made:
        yield made


def live_hashes(host: LabHost, paths: list[str]) -> list[str]:
    return [host.run(["sha256sum", "--", path]).stdout.split()[0] for path in paths]


def sshd_pids(host: NetnsHost) -> list[int]:
    """Every sshd in this host's network namespace (the listener and each session), found by the
    namespace, never by name alone: the machine and the other hosts run sshd too."""
    inode = os.stat(f"/run/netns/{host.netns}").st_ino
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            same = os.stat(f"/proc/{entry}/ns/net").st_ino == inode
            name = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        if same and name == "sshd":
            found.append(int(entry))
    return found


@pytest.mark.tier2
async def test_host_key_rotated_between_approval_and_apply_writes_nothing(lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct180"]
    inventory = parse_inventory(yaml.safe_dump(lab.inventory()), "inventory.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        plan = await request_restore(inventory, inventory.host("ct180"), origin=ORIGIN, audit=audit)
        decided = await approvals.decide(audit, plan.operation_id, ORIGIN.actor, "approved", inventory.approvals)
        before = live_hashes(host, [f.live_path for f in plan.changes])
        key = host.local_path("/etc/ssh/ssh_host_ed25519_key")
        for path in (key, key.with_name(key.name + ".pub")):
            path.unlink()
        make_keypair(key, "rotated")  # another machine now answers at that address, as far as we can tell
        await asyncio.to_thread(host.run, ["supervisorctl", "restart", "sshd"])
        result = await apply_restore(plan, decided, actor=ORIGIN.actor, audit=audit, move_extras=False)
    finally:
        audit.close()
    assert result.verdict == "error" and not any(f.status == "pass" for f in result.checks)
    assert "ct180" in result.checks[0].summary and "known_hosts" in result.checks[0].summary
    assert live_hashes(host, [f.live_path for f in plan.changes]) == before  # nothing written
    assert not host.local_path(plan.source.snapshot_root).exists()  # not even a snapshot
    assert sqlite3.connect(tmp_path / "a.db").execute("SELECT COUNT(*) FROM locks").fetchone()[0] == 0


@pytest.mark.tier2
async def test_sshd_killed_mid_verify_is_an_error_never_a_pass(lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct181"]
    assert isinstance(host, NetnsHost)
    document = lab.inventory()
    # Its service never answers a real request: the probe is in flight when sshd dies.
    document["hosts"]["ct181"]["service"]["probe"]["timeout_s"] = 120
    inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
    killed: list[int] = []

    async def kill_sshd_after_the_first_round(finding: Finding) -> None:
        if not killed and finding.name.startswith("file:"):
            killed.extend(sshd_pids(host))
            for pid in killed:
                os.kill(pid, signal.SIGKILL)

    audit = AuditStore.open(tmp_path / "a.db")
    try:
        result = await verify(VerifyPlan.for_host(inventory.host("ct181"), None),
                              origin=ORIGIN, audit=audit, on_finding=kill_sshd_after_the_first_round)
    finally:
        audit.close()
    assert len(killed) >= 2, "the listener and the session were both killed"
    statuses = {f.name: f.status for f in result.checks}
    assert result.verdict != "pass", statuses
    # The one round trip came back whole before the kill; the request in flight is never a pass.
    assert statuses["cmdline"] == statuses["stale-process"] == "pass"
    assert statuses["probe"] in {"fail", "error"}, statuses
    await until("supervisord to start a new sshd", lambda: bool(sshd_pids(host)), 30)


@pytest.mark.tier2
async def test_bot_killed_mid_restore_is_recovered_and_leaves_no_half_written_file(lab: NetnsLab,
                                                                                  tmp_path: Path) -> None:
    host = lab["ct182"]
    host.run(["sh", "-c", f"head -c 400000000 /dev/zero >> {BACKUP_DIR}/spec_info.py"])  # a copy that takes a while
    live = f"{SPEC_DIR}/spec_info.py"
    old, new = live_hashes(host, [live, f"{BACKUP_DIR}/spec_info.py"])
    db, inventory = tmp_path / "a.db", write_inventory(tmp_path / "inventory.yml", lab.inventory())
    cli = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "restore", "ct182", "--yes", "--inventory", str(inventory), "--db", str(db),
        cwd=REPO, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL)
    try:
        await until("the snapshot step", lambda: step_recorded(db, "snapshot"), 120)
    finally:
        cli.kill()  # SIGKILL: no cleanup of its own, as when the bot's machine dies
        await cli.wait()
    audit = AuditStore.open(db)
    try:
        interrupted, _ = await recover(audit)
    finally:
        audit.close()
    assert [op.operation for op in interrupted] == ["restore"]
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM locks").fetchone()[0] == 0
    await until("the host's shell to remove its temp dir", lambda: not host.run(
        ["sh", "-c", f"ls -A {SPEC_DIR} | grep proofbot || true"]).stdout.strip(), 120)
    assert live_hashes(host, [live]) in ([old], [new])  # never half-written


def step_recorded(db: Path, name: str) -> bool:
    try:
        rows = sqlite3.connect(db).execute("SELECT details FROM events WHERE kind = 'step'").fetchall()
    except sqlite3.OperationalError:  # the CLI is still creating the database
        return False
    return any(f'"name": "{name}"' in details for (details,) in rows)
