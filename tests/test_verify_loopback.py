"""Tier 1: verify end to end against loopback hosts (in-process SSH, real supervisord), via the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from bot.demo.host import DemoHost
from commands.inventory import parse_inventory
from commands.operation import OperationResult, Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.conftest import run_cli, via_port, write_inventory
from tests.lab.proxy import DelayProxy


async def test_seeded_host_fails_with_every_planted_problem(seeded_host: DemoHost, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", seeded_host.inventory())
    run = await run_cli("verify", "ct129", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"), "--json")
    assert run.code == 1, run.stderr
    report = json.loads(run.stdout)
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert statuses == {"file:spec_info.py": "fail", "file:eagle_info.py": "pass", "extra-files": "fail",
                        "main-pid": "pass", "health": "pass", "cmdline": "fail", "stale-process": "pass",
                        "probe": "pass"}
    assert report["verdict"] == "fail" and report["host"] == "ct129" and report["operation"] == "verify"
    for check in report["checks"]:
        assert check["evidence"]["command"] and check["evidence"]["output"]
        assert isinstance(check["evidence"]["exit_status"], int)


async def test_clean_host_passes_and_exits_zero(clean_host: DemoHost, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", clean_host.inventory())
    run = await run_cli("verify", "ct130", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 0, run.stdout + run.stderr
    assert "ct130: PASS" in run.stdout
    assert "8 pass" in run.stdout


async def test_human_output_says_what_failed_and_shows_the_command(seeded_host: DemoHost, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", seeded_host.inventory())
    run = await run_cli("verify", "ct129", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 1
    assert "✗ FAIL   cmdline" in run.stdout and "forbidden --enable-ddtree present" in run.stdout
    assert "$ sha256sum -- " in run.stdout


async def test_file_restored_by_hand_passes_again(tmp_path: Path) -> None:
    from bot.demo.host import demo_host

    async with demo_host("ct131", extra_file=False, flags=["--speculative-algorithm", "NEXTN"]) as host:
        inventory = write_inventory(tmp_path / "inv.yml", host.inventory())
        first = await run_cli("verify", "ct131", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"),
                              "--json")
        assert first.code == 1
        assert {c["name"] for c in json.loads(first.stdout)["checks"] if c["status"] == "fail"} == {
            "file:spec_info.py"}
        (host.live_dir / "spec_info.py").write_bytes((host.backup_dir / "spec_info.py").read_bytes())
        second = await run_cli("verify", "ct131", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"),
                               "--json")
        report = json.loads(second.stdout)
        # The file now matches, but it changed after the service started: the code running is stale.
        assert {c["name"]: c["status"] for c in report["checks"]}["stale-process"] == "warn"
        assert second.code == 0


async def test_stopped_service_fails_main_pid_and_health(tmp_path: Path) -> None:
    from bot.demo.host import demo_host

    async with demo_host("ct132", patched=False, extra_file=False,
                         flags=["--speculative-algorithm", "NEXTN"]) as host:
        assert "stopped" in (await host.supervisorctl("stop", "sglang"))
        inventory = write_inventory(tmp_path / "inv.yml", host.inventory())
        run = await run_cli("verify", "ct132", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"),
                            "--json")
        report = {c["name"]: c for c in json.loads(run.stdout)["checks"]}
        assert run.code == 1
        assert report["main-pid"]["status"] == "fail"
        assert report["health"]["status"] == "fail"
        assert report["cmdline"]["status"] == "error"


async def test_health_200_but_a_degenerate_reply_fails_verify_and_no_probe_skips_it(tmp_path: Path) -> None:
    """The second seed: /health said 200 while every real request answered "!!!!!!!!"."""
    from bot.demo.host import demo_host

    async with demo_host("ct133", patched=False, extra_file=False,
                         flags=["--speculative-algorithm", "NEXTN", "--reply", "!!!!!!!!"]) as host:
        inventory = write_inventory(tmp_path / "inv.yml", host.inventory())
        args = ("verify", "ct133", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"), "--json")
        sent = await run_cli(*args)
        skipped = await run_cli(*args, "--no-probe")
        document = host.inventory()
        del document["hosts"]["ct133"]["service"]["probe"]
        without = await run_cli("verify", "ct133", "--inventory", str(write_inventory(tmp_path / "no.yml", document)),
                                "--db", str(tmp_path / "a.db"), "--json")
    assert sent.code == 1, sent.stderr
    checks = {check["name"]: check for check in json.loads(sent.stdout)["checks"]}
    assert checks["health"]["status"] == "pass" and checks["probe"]["status"] == "fail"
    assert "one character repeated" in checks["probe"]["summary"]
    assert skipped.code == 0, skipped.stderr
    assert {c["name"]: c["status"] for c in json.loads(skipped.stdout)["checks"]}["probe"] == "skipped"
    assert without.code == 0 and "probe" not in {c["name"] for c in json.loads(without.stdout)["checks"]}


async def verify_through_a_counting_proxy(host: DemoHost, tmp_path: Path, document: dict[str, Any]
                                          ) -> tuple[OperationResult, int]:
    """Verify with the SSH link through a proxy that counts the TCP connections really opened."""
    async with DelayProxy("127.0.0.1", host.ssh_port) as proxy:
        inventory = parse_inventory(yaml.safe_dump(via_port(host, proxy.port, tmp_path, document)), "i.yml")
        audit = AuditStore.open(tmp_path / "a.db")
        try:
            result = await verify(VerifyPlan.for_host(inventory.host(host.name), None),
                                  origin=Origin("cli:t", "cli"), audit=audit)
        finally:
            audit.close()
        return result, proxy.accepted


async def test_one_connection_and_one_exec_round_trip_for_every_check(clean_host: DemoHost, tmp_path: Path) -> None:
    result, tcp_connections = await verify_through_a_counting_proxy(clean_host, tmp_path, clean_host.inventory())
    assert result.verdict == "pass", [c.to_json() for c in result.checks if c.status != "pass"]
    assert len(result.checks) == 8, "every check ran: service, hashes, listing, health, cmdline, stale, probe"
    assert tcp_connections == 1 and result.stats["connections"] == 1
    assert result.stats["exec_round_trips"] == 1  # the host-side script reads the main PID itself
    checks = {check.name: check for check in result.checks}
    pid = checks["main-pid"].details["main_pid"]
    assert f"pid {pid}," in checks["main-pid"].evidence.output  # as supervisorctl printed it
    # What was read for cmdline and stale-process is that same PID's, and the evidence says so.
    assert checks["cmdline"].summary.startswith(f"PID {pid}:")
    assert checks["cmdline"].evidence.command == f"cat /proc/{pid}/cmdline"
    assert f"cat /proc/{pid}/stat /proc/uptime" in checks["stale-process"].evidence.command
    assert f"# cat /proc/{pid}/stat /proc/uptime\n{pid} (" in checks["stale-process"].evidence.output
    audit = AuditStore.open(tmp_path / "a.db")
    kinds = [event.kind for event in await audit.events_of(result.operation_id)]
    audit.close()
    assert kinds == ["requested", *["check"] * 8, "finished"]  # written during the handshake, still first


async def test_a_host_without_a_service_needs_one_round_trip(clean_host: DemoHost, tmp_path: Path) -> None:
    document = clean_host.inventory()
    del document["hosts"][clean_host.name]["service"]
    result, tcp_connections = await verify_through_a_counting_proxy(clean_host, tmp_path, document)
    assert {c.name for c in result.checks} == {"file:spec_info.py", "file:eagle_info.py", "extra-files"}
    assert tcp_connections == 1 and result.stats == {"connections": 1, "exec_round_trips": 1}


async def test_every_failure_says_what_to_do_next(seeded_host: DemoHost, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", seeded_host.inventory())
    args = ("verify", "ct129", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    report, text = json.loads((await run_cli(*args, "--json")).stdout), (await run_cli(*args)).stdout
    steps = {c["name"]: c.get("next_step") for c in report["checks"]}
    assert steps["file:spec_info.py"]["operation"] == "restore" and steps["file:spec_info.py"]["args"] == [
        "ct129", "pre-ddtree"]
    assert steps["extra-files"]["cli_flags"] == ["--move-extras"]
    assert steps["cmdline"]["operation"] == "restart" and "launch config" in steps["cmdline"]["advice"]
    assert steps["file:eagle_info.py"] is None and steps["health"] is None  # a pass needs nothing
    assert "→ move the extra files into a snapshot with the restore: proofbot restore ct129 pre-ddtree " \
           "--move-extras" in text
