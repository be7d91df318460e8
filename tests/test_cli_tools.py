"""``proofbot ping`` and ``proofbot inventory check``: first contact with an inventory, changing nothing."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from bot.demo.host import DemoHost
from tests.conftest import run_cli, write_inventory
from tests.test_inventory_check import usable_inventory


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_ping_reaches_each_host_and_names_the_one_it_cannot(clean_host: DemoHost, tmp_path: Path) -> None:
    document = clean_host.inventory()
    document["hosts"]["ct999"] = {"address": "127.0.0.1", "port": unused_port()}
    inventory = write_inventory(tmp_path / "i.yml", document)
    text = await run_cli("ping", "--inventory", str(inventory))
    report = await run_cli("ping", "--json", "--inventory", str(inventory))
    assert text.code == 3 and report.code == 3
    lines = {line.split()[2]: line for line in text.stdout.splitlines()}
    assert "✓ pass" in lines[clean_host.name] and "host key SHA256:" in lines[clean_host.name]
    assert "cannot connect" in lines["ct999"] or "refused" in lines["ct999"]
    statuses = {entry["host"]: entry["status"] for entry in json.loads(report.stdout)["hosts"]}
    assert statuses == {clean_host.name: "pass", "ct999": "error"}
    only = await run_cli("ping", clean_host.name, "--inventory", str(inventory))
    assert only.code == 0 and "ct999" not in only.stdout


async def test_inventory_check_validates_without_connecting(tmp_path: Path) -> None:
    good = write_inventory(tmp_path / "good.yml", usable_inventory(tmp_path))
    bad = write_inventory(tmp_path / "bad.yml", {"hosts": {"ct1": {"address": "127.0.0.1", "port": "ssh"}}})
    ok, refused = (await run_cli("inventory", "check", "--inventory", str(good)),
                   await run_cli("inventory", "check", "--inventory", str(bad)))
    assert ok.code == 0 and "valid: 1 host(s) (ct1)" in ok.stdout
    assert refused.code == 2 and "hosts.ct1.port" in refused.stderr and str(bad) in refused.stderr


FOUR_PROBLEMS = """\
ssh:
  user: root
hosts:
  ct1:
    address: 127.0.0.1
    port: ssh
  ct2:
    address: 127.0.0.2
    service:
      manager: upstart
      unit: sglang
      health_url: http://127.0.0.1:30000/health
groups:
  gpu: [ct1, ct9]
fleet:
  max_parallel: 0
"""


async def test_inventory_check_lists_every_problem_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(FOUR_PROBLEMS)
    text = await run_cli("inventory", "check", "--inventory", str(bad))
    report = await run_cli("inventory", "check", "--json", "--inventory", str(bad))
    assert text.code == 2 and report.code == 2
    assert text.stderr.splitlines() == [
        f"proofbot: 4 problems in {bad}:",
        f"{bad}:6: hosts.ct1.port: Input should be a valid integer, unable to parse string as an integer",
        f"{bad}:10: hosts.ct2.service.manager: Input should be 'systemd', 'supervisord', 'docker', 'podman' or "
        "'compose'",
        f"{bad}:14: groups.gpu[1]: unknown host or group 'ct9'",
        f"{bad}:16: fleet.max_parallel: Input should be greater than or equal to 1"]
    problems = json.loads(report.stdout)["error"]["problems"]
    assert [(p["file"], p["line"], p["key"]) for p in problems] == [
        (str(bad), 6, "hosts.ct1.port"), (str(bad), 10, "hosts.ct2.service.manager"), (str(bad), 14, "groups.gpu[1]"),
        (str(bad), 16, "fleet.max_parallel")]
    good = write_inventory(tmp_path / "good.yml", usable_inventory(tmp_path))
    valid = json.loads((await run_cli("inventory", "check", "--json", "--inventory", str(good))).stdout)
    assert valid["valid"] is True and valid["hosts"] == ["ct1"] and valid["groups"] == ["all"]


async def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yml"
    bad.write_text("hosts:\n  ct1:\n    address: [127.0.0.1\n    port: 22\n")
    run = await run_cli("inventory", "check", "--inventory", str(bad))
    assert run.code == 2 and "<unicode string>" not in run.stderr
    # the line of the '[' left open, not the next line where PyYAML gave up (tests/test_inventory_check.py)
    assert run.stderr.startswith(f"proofbot: {bad}:3:14: not valid YAML: ")
