"""Tiers 2 and 3: `proofbot verify` against real OpenSSH hosts (supervisord) and real systemd hosts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.conftest import run_cli, write_inventory
from tests.lab.common import BaseLab, LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab
from tests.lab.nspawn import NspawnLab

PATCHED = Scenario(patched=True)
EVERY_CHECK = {"file:spec_info.py", "file:eagle_info.py", "file:server_args.py", "extra-files", "main-pid",
               "health", "cmdline", "stale-process", "probe"}  # the lab hosts have a probe: verify sends it


@pytest.fixture(scope="module")
def netns_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct129": PATCHED, "ct130": Scenario(),
                                 "ct131": Scenario(hang=True)}) as lab:
        yield lab


@pytest.fixture(scope="module")
def nspawn_lab() -> Iterator[NspawnLab]:
    with running_lab(NspawnLab, {"ct140": PATCHED, "ct141": Scenario()}) as lab:
        yield lab


async def verify_cli(lab: BaseLab, host: str, tmp_path: Path, document: dict[str, object] | None = None
                     ) -> tuple[int, dict[str, str], str]:
    inventory = write_inventory(tmp_path / "inventory.yml", document or lab.inventory())
    run = await run_cli("verify", host, "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    report = json.loads(run.stdout) if run.stdout.strip() else {"checks": []}
    return run.code, {check["name"]: check["status"] for check in report["checks"]}, run.stderr


@pytest.mark.tier2
async def test_patched_supervisord_host_fails_only_the_patched_file(netns_lab: NetnsLab, tmp_path: Path) -> None:
    code, statuses, stderr = await verify_cli(netns_lab, "ct129", tmp_path)
    assert code == 1, stderr
    assert set(statuses) == EVERY_CHECK
    assert statuses.pop("file:spec_info.py") == "fail"
    assert set(statuses.values()) == {"pass"}, statuses


@pytest.mark.tier2
async def test_untouched_supervisord_host_passes(netns_lab: NetnsLab, tmp_path: Path) -> None:
    code, statuses, stderr = await verify_cli(netns_lab, "ct130", tmp_path)
    assert code == 0, stderr
    assert set(statuses) == EVERY_CHECK and set(statuses.values()) == {"pass"}


@pytest.mark.tier2
async def test_changed_host_key_is_refused_exit_3(netns_lab: NetnsLab, tmp_path: Path) -> None:
    document = netns_lab.inventory()
    stranger = netns_lab["ct131"].host_key_pub
    known = tmp_path / "known_hosts"
    known.write_text(f"{netns_lab['ct130'].address} {stranger}\n")
    document["ssh"]["known_hosts"] = str(known)  # type: ignore[index]
    code, statuses, _ = await verify_cli(netns_lab, "ct130", tmp_path, document)
    assert code == 3
    assert set(statuses.values()) == {"error"}


@pytest.mark.tier2
async def test_link_dropped_mid_verify_is_an_error_never_a_pass(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host: LabHost = netns_lab["ct131"]  # its probe never answers: the request is in flight when the link drops
    document = netns_lab.inventory()
    document["hosts"]["ct131"]["service"]["probe"]["timeout_s"] = 120  # so only the link can end it
    plan = VerifyPlan.for_host(parse_inventory(yaml.safe_dump(document), "i.yml").host("ct131"), None)
    audit = AuditStore.open(tmp_path / "a.db")
    drop = ["iptables", "-I", "INPUT", "-i", "eth0", "-j", "DROP"]

    async def cut_link(finding: Finding) -> None:
        if finding.name == "main-pid":
            await asyncio.to_thread(host.net_run, drop)

    try:
        result = await verify(plan, origin=Origin.local_user(), audit=audit, on_finding=cut_link)
    finally:
        await asyncio.to_thread(host.net_run, ["iptables", "-D", "INPUT", "-i", "eth0", "-j", "DROP"], False)
        audit.close()
    statuses = {finding.name: finding.status for finding in result.checks}
    # main-pid, cmdline and stale-process came back in the one round trip, whole, before the drop.
    assert statuses["main-pid"] == statuses["cmdline"] == statuses["stale-process"] == "pass"
    assert statuses["probe"] in {"fail", "error"} and result.verdict != "pass"  # in flight: never a pass


@pytest.mark.tier3
async def test_patched_systemd_host_fails_only_the_patched_file(nspawn_lab: NspawnLab, tmp_path: Path) -> None:
    code, statuses, stderr = await verify_cli(nspawn_lab, "ct140", tmp_path)
    assert code == 1, stderr
    assert statuses.pop("file:spec_info.py") == "fail"
    assert set(statuses.values()) == {"pass"}, statuses


@pytest.mark.tier3
async def test_untouched_systemd_host_passes_with_real_main_pid(nspawn_lab: NspawnLab, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", nspawn_lab.inventory())
    run = await run_cli("verify", "ct141", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 0, run.stdout + run.stderr
    checks = {check["name"]: check for check in json.loads(run.stdout)["checks"]}
    main_pid = checks["main-pid"]
    assert main_pid["evidence"]["command"].startswith("systemctl show sglang --property=MainPID")
    pid = nspawn_lab["ct141"].service_pid()
    assert f"MainPID={pid}" in main_pid["evidence"]["output"]
    assert f"/proc/{pid}/cmdline" in checks["cmdline"]["evidence"]["command"]


@pytest.mark.tier3
async def test_stopped_systemd_unit_fails_main_pid(nspawn_lab: NspawnLab, tmp_path: Path) -> None:
    host = nspawn_lab["ct141"]
    await asyncio.to_thread(host.run, ["systemctl", "stop", "sglang"])
    try:
        code, statuses, _ = await verify_cli(nspawn_lab, "ct141", tmp_path)
    finally:
        await asyncio.to_thread(host.run, ["systemctl", "start", "sglang"])
    assert code == 1
    assert statuses["main-pid"] == "fail" and statuses["health"] == "fail" and statuses["cmdline"] == "error"
