"""Tier 1: `proofbot verify GROUP` (and several targets) as a terminal user reads it: grouped text, --json, exit codes.

The fleet is inventory hosts over the two loopback lab hosts (seeded: fails; clean: passes) and a
black-holed DelayProxy in front of the clean one (times out at ``fleet.host_deadline_s``).
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

from bot.cli.fleet_view import fleet_exit_code
from bot.demo.host import DemoHost
from commands.findings import Evidence, Finding
from commands.fleet.names import compress_names
from commands.operation import OperationResult
from commands.verify.fleet import FleetResult
from tests.conftest import REPO, run_cli
from tests.fleet_rig import fleet_document, fleet_entry, proxied_known_hosts
from tests.lab.proxy import DelayProxy

# The black-holed host's wait; long enough that the others, on a machine shared with other suites, finish.
DEADLINE_S = 10
SINGLE_HOST_KEYS = {"host", "operation", "verdict", "started_at", "duration_s", "operation_id", "checks"}


@pytest_asyncio.fixture(loop_scope="session")
async def black_hole(clean_host: DemoHost, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """The clean host's entry reached through a proxy that swallows every byte: it never answers."""
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        proxy.blackhole()
        entry = fleet_entry(clean_host, proxy.port, proxied_known_hosts(clean_host, proxy.port, tmp_path / "kh"))
        entry["ssh"]["connect_timeout_s"] = 60  # so the host meets its fleet deadline, not the connect timeout
        yield entry


async def fleet_cli(tmp_path: Path, document: str, *args: str) -> Any:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(document)
    return await run_cli("verify", *args, "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))


async def test_grouped_summary_failing_first_one_example_and_the_hung_host_named(
        seeded_host: DemoHost, clean_host: DemoHost, black_hole: dict[str, Any], tmp_path: Path) -> None:
    hosts = {"ct129": fleet_entry(seeded_host), "ct130": fleet_entry(clean_host), "ct131": fleet_entry(clean_host),
             "ct132": fleet_entry(seeded_host), "ct133": black_hole}
    run = await fleet_cli(tmp_path, fleet_document(hosts, clean_host, host_deadline_s=DEADLINE_S), "gpu-west")
    assert run.code == 1, run.stdout + run.stderr  # the worst host's: a failure outranks a could-not-check
    lines = run.stdout.splitlines()
    assert lines[0].startswith("proofbot verify gpu-west: FAIL · 5 hosts · 2 pass · 2 fail · 1 could not check · ")
    failing = lines.index("✗ FAIL · 2 hosts: ct[129,132]  (evidence from ct129; the others' in "
                          "`proofbot audit HOST` and --json)")
    hung = lines.index("? COULD NOT CHECK · 1 host: ct133")
    passing = lines.index("✓ PASS · 2 hosts: ct[130-131]")
    assert failing < hung < passing
    failed_block = "\n".join(lines[failing:hung])
    assert "✗ FAIL   cmdline" in failed_block and "forbidden --enable-ddtree present" in failed_block
    assert "→ " in failed_block and "proofbot restore ct129" in failed_block  # the next step, as typed
    assert run.stdout.count("$ sha256sum -- ") == 1  # one example's evidence, not every host's
    hung_block = "\n".join(lines[hung:passing])
    assert f"timed out after {DEADLINE_S} s (fleet.host_deadline_s)" in hung_block
    assert "? error  7 more not checked: the same cause: file:eagle_info.py, extra-files, main-pid" in hung_block
    assert len(hung_block.splitlines()) == 3  # the group, the cause, one line for the checks it stopped
    assert "also: file:eagle_info.py" in failed_block  # the example's passing checks, named on one line
    assert lines[-1].startswith("operation op-")


async def test_json_is_one_object_with_every_host_as_one_host_prints_it(
        seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> None:
    hosts = {"ct129": fleet_entry(seeded_host), "ct130": fleet_entry(clean_host)}
    run = await fleet_cli(tmp_path, fleet_document(hosts, clean_host), "ct130", "gpu-west", "--json")
    assert run.code == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["schema_version"] == 1 and report["operation"] == "verify"
    assert report["target"] == "ct130 gpu-west" and report["verdict"] == "fail"
    assert report["counts"] == {"pass": 1, "warn": 0, "fail": 1, "error": 0}
    assert report["operation_id"].startswith("op-") and report["duration_s"] > 0
    assert report["without_backup"] == []
    assert [host["host"] for host in report["hosts"]] == ["ct130", "ct129"]  # in the order named, each once
    for host in report["hosts"]:
        assert set(host) == SINGLE_HOST_KEYS and host["operation_id"] != report["operation_id"]
    assert {c["name"]: c["status"] for c in report["hosts"][1]["checks"]}["cmdline"] == "fail"

    verbose = await fleet_cli(tmp_path, fleet_document(hosts, clean_host), "gpu-west", "-v")
    example = verbose.stdout.split("✗ FAIL · 1 host: ct129", 1)[1].split("✓ PASS · 1 host: ct130", 1)[0]
    assert "✓ pass   main-pid" in example and "also:" not in example  # -v: every check of the example
    assert example.count("(exit 0") == 8  # and the evidence of each, passing ones too

    one = await fleet_cli(tmp_path, fleet_document(hosts, clean_host), "ct130", "--json")
    assert one.code == 0 and set(json.loads(one.stdout)) == SINGLE_HOST_KEYS | {"schema_version"}  # as ever


async def test_exit_code_is_the_worst_hosts(clean_host: DemoHost, black_hole: dict[str, Any], tmp_path: Path) -> None:
    clean = {"ct130": fleet_entry(clean_host), "ct131": fleet_entry(clean_host)}
    passing = await fleet_cli(tmp_path, fleet_document(clean, clean_host), "gpu-west")
    assert passing.code == 0, passing.stdout + passing.stderr
    assert passing.stdout.splitlines()[0].startswith("proofbot verify gpu-west: PASS · 2 hosts · 2 pass · ")
    assert "✓ PASS · 2 hosts: ct[130-131]" in passing.stdout

    document = fleet_document({**clean, "ct140": black_hole}, clean_host, host_deadline_s=DEADLINE_S)
    hung = await fleet_cli(tmp_path, document, "all", "--json")
    assert hung.code == 3, hung.stdout  # nothing failed, one host could not be checked
    report = json.loads(hung.stdout)
    assert report["verdict"] == "error" and report["counts"]["error"] == 1


def test_strict_makes_a_fleet_with_a_warning_exit_1() -> None:
    warned = OperationResult("op-b", "verify", "ct131", "2026-01-01T00:00:00.000Z", 0.1,
                             [Finding("stale-process", "warn", "restart it")])
    clean = OperationResult("op-a", "verify", "ct130", "2026-01-01T00:00:00.000Z", 0.1,
                            [Finding("main-pid", "pass", "PID 1", Evidence.of("true", 0, "", 0.1))])
    fleet = FleetResult("op-f", "verify", "all", "2026-01-01T00:00:00.000Z", 0.2, [clean, warned])
    assert fleet_exit_code(fleet) == 0
    assert fleet_exit_code(fleet, strict=True) == 1


async def test_backup_applies_to_the_hosts_that_have_it_and_the_others_are_said(
        seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> None:
    bare = fleet_entry(clean_host)
    del bare["backups"]
    two = fleet_entry(clean_host)
    two["backups"]["older"] = two["backups"]["pre-ddtree"]
    hosts = {"ct129": fleet_entry(seeded_host), "ct130": bare, "ct131": two}
    document = fleet_document(hosts, clean_host)

    named = await fleet_cli(tmp_path, document, "gpu-west", "--backup", "pre-ddtree")
    assert named.code == 1, named.stderr
    assert "» skip ct130: no backup pre-ddtree: verified without files" in named.stdout.splitlines()[1]
    assert "ct131" not in named.stdout.splitlines()[1]  # it has pre-ddtree: compared

    unnamed = await fleet_cli(tmp_path, document, "gpu-west", "--json")
    report = json.loads(unnamed.stdout)
    assert report["without_backup"] == [{"host": "ct131", "reason": "several backups (older, pre-ddtree) and none "
                                                                    "named (--backup NAME)"}]
    checks = {host["host"]: [c["name"] for c in host["checks"]] for host in report["hosts"]}
    assert not any(name.startswith("file:") for name in checks["ct131"]) and "main-pid" in checks["ct131"]
    assert "file:spec_info.py" in checks["ct129"] and unnamed.code == 1
    with closing(sqlite3.connect(tmp_path / "a.db")) as db:  # the fleet's request says it too
        (asked,) = db.execute("SELECT details FROM events WHERE operation_id = ? AND kind = 'requested'",
                              [report["operation_id"]]).fetchone()
    assert json.loads(asked)["fleet"]["without_backup"] == {"ct131": report["without_backup"][0]["reason"]}

    typo = await fleet_cli(tmp_path, document, "gpu-west", "--backup", "pre-ddtre")
    assert typo.code == 2 and typo.stdout == ""
    assert "no host here has a backup 'pre-ddtre'" in typo.stderr and "older, pre-ddtree" in typo.stderr


async def test_unknown_target_exits_2_listing_hosts_and_groups(clean_host: DemoHost, tmp_path: Path) -> None:
    document = fleet_document({"ct130": fleet_entry(clean_host)}, clean_host)
    run = await fleet_cli(tmp_path, document, "gpu-west", "gpu-east")
    assert run.code == 2 and run.stdout == ""
    assert "unknown host or group 'gpu-east'" in run.stderr and "groups: all, gpu-west" in run.stderr
    as_json = await fleet_cli(tmp_path, document, "gpu-east", "--json")
    error = json.loads(as_json.stdout)["error"]
    assert as_json.code == 2 and error["code"] == 2 and "groups: all, gpu-west" in error["hint"]


async def test_ping_takes_groups_and_restore_says_it_takes_one_host(clean_host: DemoHost, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yml"
    document = yaml.safe_load(fleet_document({"ct130": fleet_entry(clean_host), "ct131": fleet_entry(clean_host)},
                                             clean_host))
    inventory.write_text(yaml.safe_dump(document))
    ping = await run_cli("ping", "gpu-west", "--inventory", str(inventory), "--json")
    assert ping.code == 0, ping.stdout + ping.stderr
    assert [host["host"] for host in json.loads(ping.stdout)["hosts"]] == ["ct130", "ct131"]
    restore = await run_cli("restore", "gpu-west", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert restore.code == 2 and "'gpu-west' is a group of 2 hosts; this command takes one host" in restore.stderr


def test_host_names_are_said_briefly_and_completely() -> None:
    assert compress_names(["ct129", "ct130", "ct131", "ct140", "gpu-a"]) == "ct[129-131,140], gpu-a"
    assert compress_names(["ct131", "ct129"]) == "ct[129,131]"
    assert compress_names(["ct129"]) == "ct129"
    assert compress_names(["gpu01", "gpu02", "gpu1", "gpu03"]) == "gpu[01-03], gpu1"
    assert compress_names(["a", "b", "a"]) == "a, b"
    assert compress_names([f"n{i}" for i in range(500)]) == "n[0-499]"
    assert compress_names([f"gpu{i:02d}" for i in range(1, 13)]) == "gpu[01-12]"


async def test_on_a_terminal_the_host_still_hanging_is_named_while_it_hangs(
        clean_host: DemoHost, black_hole: dict[str, Any], tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(fleet_document({"ct130": fleet_entry(clean_host), "ct131": fleet_entry(clean_host),
                                         "ct140": black_hole}, clean_host, host_deadline_s=DEADLINE_S))
    controller, terminal = pty.openpty()  # stderr is a terminal, as when a person runs it; stdout a pipe
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "verify", "gpu-west", "--inventory", str(inventory),
            "--db", str(tmp_path / "a.db"), cwd=REPO, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=terminal)
        os.close(terminal)
        seen = b""
        while b"waiting on ct140" not in seen.rsplit(b"\r", 1)[-1] or b"2/3 hosts" not in seen:
            chunk = await asyncio.to_thread(os.read, controller, 4096)  # the child is still running
            assert chunk, seen
            seen += chunk
        assert child.returncode is None  # named while it hangs, before the deadline ends the run
        out, _ = await child.communicate()
    finally:
        os.close(controller)
    assert child.returncode == 3
    assert seen.decode().startswith("0/3 hosts · 0 ✓ · waiting on ct130, ct131, ct140")
    assert "\r\x1b[K2/3 hosts · 2 ✓ · waiting on ct140" in seen.decode()
    assert out.decode().startswith("proofbot verify gpu-west: COULD NOT CHECK · 3 hosts")  # stdout: the summary
