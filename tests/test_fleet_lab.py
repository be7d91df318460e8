"""Tier 2: `proofbot verify all` over 21 namespace hosts (real OpenSSH + supervisord), as a terminal user reads it.

Four hosts carry the same patch (spec_info.py differs from its backup, the same bytes on each),
one has its service stopped, one is black-holed (every packet dropped inside its namespace), the
other fifteen are untouched. The topology is built once for the module.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_inventory
from tests.lab.common import BACKUP_DIR, BACKUP_MTIME, LIVE_FILES, LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab

NAMES = [f"ct{n}" for n in range(201, 222)]
PATCHED = ["ct203", "ct207", "ct211", "ct215"]
STOPPED, BLACK_HOLED = "ct219", "ct220"
DEADLINE_S = 15  # well under the connect timeout below, so the black-holed host meets this deadline
CLEAN = ('"""Speculative decoding algorithms."""\nfrom enum import IntEnum, auto\n\n\n'
         "class SpeculativeAlgorithm(IntEnum):\n")
DROP = ["iptables", "-I", "INPUT", "-i", "eth0", "-j", "DROP"]


def _patch_alike(host: LabHost) -> None:
    """The same patch on every patched host (the lab's own copies name their host), dated before the
    service started so only the file check, not stale-process, sees it."""
    backup, live = host.local_path(f"{BACKUP_DIR}/spec_info.py"), host.local_path(LIVE_FILES["spec_info.py"])
    backup.write_text(CLEAN)
    live.write_text(CLEAN + "    DDTREE = auto()  # ddtree patch\n")
    for path in (backup, live):
        os.utime(path, (BACKUP_MTIME, BACKUP_MTIME))


@pytest.fixture(scope="module")
def fleet_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {name: Scenario() for name in NAMES}) as lab:
        for name in PATCHED:
            _patch_alike(lab[name])
        lab[STOPPED].run(["supervisorctl", "stop", "sglang"])
        lab[BLACK_HOLED].net_run(DROP)
        yield lab


def _inventory(lab: NetnsLab, tmp_path: Path) -> Path:
    document: dict[str, Any] = lab.inventory()
    document["ssh"]["connect_timeout_s"] = 60
    document["fleet"] = {"max_parallel": 32, "host_deadline_s": DEADLINE_S}
    return write_inventory(tmp_path / "inventory.yml", document)


@pytest.mark.tier2
async def test_verify_all_prints_the_grouped_summary_and_exits_with_the_worst(fleet_lab: NetnsLab,
                                                                             tmp_path: Path) -> None:
    run = await run_cli("verify", "all", "--inventory", str(_inventory(fleet_lab, tmp_path)),
                        "--db", str(tmp_path / "a.db"))
    assert run.code == 1, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"proofbot verify all: FAIL · 21 hosts · 15 pass · 5 fail · 1 could not check · "
                        r"\d+\.\d s", lines[0]), lines[0]
    heads = [line for line in lines if re.match(r"^[✗?!✓] ", line)]
    assert heads == [
        "✗ FAIL · 4 hosts: ct[203,207,211,215]  (evidence from ct203; the others' in `proofbot audit HOST` and --json)",
        "✗ FAIL · 1 host: ct219",
        "? COULD NOT CHECK · 1 host: ct220",
        "✓ PASS · 15 hosts: ct[201-202,204-206,208-210,212-214,216-218,221]",
    ]
    patched = "\n".join(lines[lines.index(heads[0]):lines.index(heads[1])])
    assert "✗ FAIL   file:spec_info.py" in patched and "differs from backup pre-ddtree" in patched
    assert "→ put the backup's copy back: proofbot restore ct203 pre-ddtree" in patched
    assert "also: file:eagle_info.py, file:server_args.py, extra-files, main-pid, health, cmdline" in patched
    stopped = "\n".join(lines[lines.index(heads[1]):lines.index(heads[2])])
    assert "✗ FAIL   main-pid" in stopped and "STOPPED" in stopped and "✗ FAIL   health" in stopped
    hung = "\n".join(lines[lines.index(heads[2]):lines.index(heads[3])])
    assert f"timed out after {DEADLINE_S} s (fleet.host_deadline_s)" in hung


@pytest.mark.tier2
async def test_every_other_host_completes_while_the_black_holed_one_times_out(fleet_lab: NetnsLab,
                                                                             tmp_path: Path) -> None:
    run = await run_cli("verify", "all", "--json", "--inventory", str(_inventory(fleet_lab, tmp_path)),
                        "--db", str(tmp_path / "a.db"))
    assert run.code == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["verdict"] == "fail" and report["counts"] == {"pass": 15, "warn": 0, "fail": 5, "error": 1}
    hosts = {host["host"]: host for host in report["hosts"]}
    assert list(hosts) == NAMES
    for name in NAMES:
        statuses = {check["name"]: check["status"] for check in hosts[name]["checks"]}
        if name == BLACK_HOLED:
            assert set(statuses.values()) == {"error"}
            assert hosts[name]["duration_s"] >= DEADLINE_S
        elif name != STOPPED:  # a completed host: every check came back with its evidence
            assert "error" not in statuses.values(), (name, statuses)
            assert all(check["evidence"] for check in hosts[name]["checks"]), name
    # the hung host held no one: in the audit log every other host finished before it did
    with sqlite3.connect(tmp_path / "a.db") as db:
        order = [host for (host,) in db.execute(
            "SELECT host FROM events WHERE kind = 'finished' AND host IS NOT NULL ORDER BY id")]
    assert sorted(order) == NAMES and order[-1] == BLACK_HOLED
