"""Bad input at the CLI: a clear message, the right exit code, nothing run on any host."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

from bot.demo.host import DemoHost
from tests.conftest import run_cli, write_inventory


async def test_shell_metacharacters_in_host_are_an_unknown_host(seeded_host: DemoHost, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    inventory = write_inventory(tmp_path / "inv.yml", seeded_host.inventory())
    db = tmp_path / "a.db"
    run = await run_cli("verify", f"ct129; touch {canary}", "--inventory", str(inventory), "--db", str(db))
    assert run.code == 2
    assert "unknown host" in run.stderr and "known hosts: ct129" in run.stderr
    assert not canary.exists()
    refused = sqlite3.connect(db).execute("SELECT kind, details FROM events").fetchall()
    assert [kind for kind, _ in refused] == ["refused"]
    assert "touch" in json.loads(refused[0][1])["requested_host"]


async def test_malformed_inventory_exits_2_naming_the_key(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yml"
    inventory.write_text("hosts:\n  ct129:\n    address: 10.0.0.1\n    port: twenty-two\n")
    run = await run_cli("verify", "ct129", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 2
    assert f"{inventory}:4: hosts.ct129.port:" in run.stderr  # FILE:LINE: KEY
    assert "Traceback" not in run.stderr


async def test_unreachable_host_exits_3_with_every_check_an_error(seeded_host: DemoHost, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    document = seeded_host.inventory()
    document["hosts"]["ct129"]["port"] = port
    inventory = write_inventory(tmp_path / "inv.yml", document)
    run = await run_cli("verify", "ct129", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"), "--json")
    assert run.code == 3, run.stderr
    report = json.loads(run.stdout)
    assert report["verdict"] == "error"
    assert {check["status"] for check in report["checks"]} == {"error"}
    assert "cannot connect" in report["checks"][0]["summary"]
    assert sum("cannot connect" in check["summary"] for check in report["checks"]) == 1  # said once
    assert report["checks"][0]["next_step"]["advice"].startswith(f"check that 127.0.0.1:{port} answers SSH")
    assert "Traceback" not in run.stderr


async def test_unknown_backup_exits_2(seeded_host: DemoHost, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inv.yml", seeded_host.inventory())
    run = await run_cli("verify", "ct129", "--backup", "nope", "--inventory", str(inventory),
                        "--db", str(tmp_path / "a.db"))
    assert run.code == 2
    assert "known: pre-ddtree" in run.stderr


async def test_missing_inventory_exits_2_with_a_hint(tmp_path: Path) -> None:
    run = await run_cli("verify", "ct129", "--db", str(tmp_path / "a.db"),
                        env={"PROOFBOT_INVENTORY": str(tmp_path / "missing.yml")})
    assert run.code == 2
    assert "inventory file not found" in run.stderr and "--inventory" in run.stderr
