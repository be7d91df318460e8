"""Tier 1: a link that dies mid-verify yields `error` for what was not checked, never a pass."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.demo.host import DemoHost
from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.events import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.proxy import DelayProxy


def through_proxy(lab: DemoHost, port: int) -> VerifyPlan:
    document = lab.inventory()
    document["hosts"][lab.name]["port"] = port
    key_line = lab.known_hosts.read_text().split(" ", 1)[1]
    known = lab.root / f"known_hosts_{port}"
    known.write_text(f"[127.0.0.1]:{port} {key_line}")
    document["ssh"]["known_hosts"] = str(known)
    return VerifyPlan.for_host(parse_inventory(yaml.safe_dump(document), "t.yml").host(lab.name), None)


async def test_link_blackholed_after_first_round_gives_error_not_pass(clean_host: DemoHost, tmp_path: Path) -> None:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        plan = through_proxy(clean_host, proxy.port)
        audit = AuditStore.open(tmp_path / "a.db")

        async def cut_after_main_pid(finding: Finding) -> None:
            if finding.name == "main-pid":
                proxy.blackhole()

        # How soon keepalive notices the dead link is a figure in bench/timing_bench.py, not a bound here.
        result = await verify(plan, origin=Origin.local_user(), audit=audit, on_finding=cut_after_main_pid)
        audit.close()
    statuses = {finding.name: finding.status for finding in result.checks}
    assert statuses["main-pid"] == "pass"
    assert statuses["cmdline"] == "error" and statuses["stale-process"] == "error"
    assert result.verdict == "error"
    lost = next(f for f in result.checks if f.name == "cmdline")
    assert "could not check" in lost.summary


async def test_link_reset_before_anything_ran_gives_all_errors(clean_host: DemoHost, tmp_path: Path) -> None:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        proxy.blackhole()
        document_plan = through_proxy(clean_host, proxy.port)
        document = document_plan.host.model_copy(
            update={"ssh": document_plan.host.ssh.model_copy(update={"connect_timeout_s": 1.0})})
        audit = AuditStore.open(tmp_path / "a.db")
        result = await verify(VerifyPlan.for_host(document, None), origin=Origin.local_user(), audit=audit)
        audit.close()
    assert {finding.status for finding in result.checks} == {"error"}
    assert result.verdict == "error"
    assert all(finding.evidence is None for finding in result.checks)
