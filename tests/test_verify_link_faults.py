"""Tier 1: a link that dies mid-verify yields `error` for what was not checked, never a pass."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.demo.host import DemoHost, demo_host
from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.proxy import DelayProxy


def through_proxy(lab: DemoHost, port: int, probe_timeout_s: float = 10) -> VerifyPlan:
    document = lab.inventory()
    document["hosts"][lab.name]["service"]["probe"]["timeout_s"] = probe_timeout_s
    document["hosts"][lab.name]["port"] = port
    key_line = lab.known_hosts.read_text().split(" ", 1)[1]
    known = lab.root / f"known_hosts_{port}"
    known.write_text(f"[127.0.0.1]:{port} {key_line}")
    document["ssh"]["known_hosts"] = str(known)
    return VerifyPlan.for_host(parse_inventory(yaml.safe_dump(document), "t.yml").host(lab.name), None)


async def test_link_blackholed_with_a_request_in_flight_gives_error_not_pass(tmp_path: Path) -> None:
    async with demo_host("ct139", patched=False, extra_file=False,
                         flags=["--speculative-algorithm", "NEXTN", "--hang"]) as hung, \
            DelayProxy("127.0.0.1", hung.ssh_port) as proxy:
        # The probe never answers and may wait 120 s: when the link dies it is still in flight.
        plan = through_proxy(hung, proxy.port, probe_timeout_s=120)
        audit = AuditStore.open(tmp_path / "a.db")

        async def cut_after_main_pid(finding: Finding) -> None:
            if finding.name == "main-pid":
                proxy.blackhole()

        # How soon keepalive notices the dead link is a figure in bench/timing_bench.py, not a bound here.
        result = await verify(plan, origin=Origin.local_user(), audit=audit, on_finding=cut_after_main_pid)
        audit.close()
    statuses = {finding.name: finding.status for finding in result.checks}
    # main-pid, cmdline and stale-process came back in the one round trip, whole, before the cut.
    assert statuses["main-pid"] == statuses["cmdline"] == statuses["stale-process"] == "pass"
    # The request in flight is never a pass (host_http says "no HTTP response" for a dead channel).
    lost = next(f for f in result.checks if f.name == "probe")
    assert lost.status in {"fail", "error"} and result.verdict != "pass", lost.summary
    assert "no HTTP response" in lost.summary or "connection lost" in lost.summary, lost.summary


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
    # The request was written while the handshake was tried; the log still has it first.
    audit = AuditStore.open(tmp_path / "a.db")
    kinds = [event.kind for event in await audit.events_of(result.operation_id)]
    audit.close()
    assert kinds == ["requested", *["check"] * len(result.checks), "finished"]
