"""``proofbot inventory check`` finds, without connecting, what would fail only later: missing or
unreadable known_hosts, key and certificate files, files another user can write, hosts with nothing to
verify, unknown keys (with the key meant), and YAML mistakes at the line where they are."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from commands.errors import InventoryError
from commands.inventory import parse_inventory
from tests.conftest import run_cli, write_inventory

SERVICE = {"manager": "systemd", "unit": "sglang", "health_url": "http://127.0.0.1:30000/health"}


def usable_inventory(tmp_path: Path, **hosts: dict[str, Any]) -> dict[str, Any]:
    """An inventory `inventory check` passes: its known_hosts and key files exist, its host has a service."""
    known, key = tmp_path / "known_hosts", tmp_path / "id_ed25519"
    known.write_text("")
    key.write_text("")
    key.chmod(0o600)
    return {"ssh": {"known_hosts": str(known), "client_keys": [str(key)]},
            "hosts": hosts or {"ct1": {"address": "127.0.0.1", "port": 9, "service": SERVICE}}}


async def check(path: Path) -> tuple[int, list[str], list[dict[str, Any]]]:
    """The text lines after the heading, and the JSON problems (the same problems, in the same order)."""
    text = await run_cli("inventory", "check", "--inventory", str(path))
    report = await run_cli("inventory", "check", "--json", "--inventory", str(path))
    assert text.code == report.code
    problems = json.loads(report.stdout).get("error", {}).get("problems", [])
    lines = text.stderr.splitlines()[1:] if len(problems) > 1 else [text.stderr.removeprefix("proofbot: ").strip()]
    return text.code, lines, problems


async def test_a_usable_inventory_passes(tmp_path: Path) -> None:
    path = write_inventory(tmp_path / "i.yml", usable_inventory(tmp_path))
    run = await run_cli("inventory", "check", "--inventory", str(path))
    assert run.code == 0, run.stderr
    assert "valid: 1 host(s) (ct1), 1 service(s)" in run.stdout


async def test_missing_files_are_named_at_the_key_that_names_them(tmp_path: Path) -> None:
    document = usable_inventory(tmp_path)
    document["ssh"]["known_hosts"] = str(tmp_path / "nowhere" / "known_hosts")
    document["ssh"]["global_known_hosts"] = []
    document["hosts"]["ct1"]["ssh"] = {"client_keys": [str(tmp_path / "id_typo")],
                                       "client_certs": [str(tmp_path / "id-cert.pub")]}
    path = write_inventory(tmp_path / "i.yml", document)
    text = path.read_text().splitlines()
    code, lines, problems = await check(path)
    assert code == 2
    assert [(p["line"], p["key"]) for p in problems] == [
        (text.index(f"  known_hosts: {tmp_path}/nowhere/known_hosts") + 1, "ssh.known_hosts"),
        (text.index("      client_keys:") + 1, "hosts.ct1.ssh.client_keys"),
        (text.index("      client_certs:") + 1, "hosts.ct1.ssh.client_certs")]
    assert "no known_hosts file can be read" in problems[0]["message"]
    assert f"{tmp_path}/nowhere/known_hosts does not exist" in problems[0]["message"]
    assert "no client key can be read" in problems[1]["message"] and "id_typo does not exist" in problems[1]["message"]
    assert problems[2]["message"] == f"certificate {tmp_path}/id-cert.pub does not exist"
    assert lines == [f"{p['file']}:{p['line']}: {p['key']}: {p['message']}" for p in problems]


async def test_a_file_that_cannot_be_read_is_refused_and_a_fifo_does_not_hang_it(tmp_path: Path) -> None:
    document = usable_inventory(tmp_path)
    fifo, folder = tmp_path / "kh.fifo", tmp_path / "keys.d"
    os.mkfifo(fifo)
    folder.mkdir(mode=0o700)
    document["ssh"]["known_hosts"] = [document["ssh"]["known_hosts"], str(fifo)]
    document["ssh"]["client_keys"].append(str(folder))
    path = write_inventory(tmp_path / "i.yml", document)
    code, _, problems = await check(path)
    assert code == 2
    assert [(p["key"], p["message"]) for p in problems] == [
        ("ssh.known_hosts", f"known_hosts {fifo} is not a regular file"),
        ("ssh.client_keys", f"client key {folder} is not a regular file")]


async def test_files_another_user_can_write_are_named_once_at_the_key_that_names_them(tmp_path: Path) -> None:
    """Real modes: a known_hosts file every host shares (world-writable), proofbot's default key (readable by
    others) for two hosts, and one host's own key in a directory anyone can write: each file once, at its key."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    default_key = home / ".ssh" / "id_ed25519"
    default_key.write_text("")
    default_key.chmod(0o644)
    shared = tmp_path / "drop"
    shared.mkdir()
    shared.chmod(0o777)
    own_key = shared / "id_ct3"
    own_key.write_text("")
    own_key.chmod(0o600)
    document = usable_inventory(tmp_path, ct1={"address": "127.0.0.1", "service": SERVICE},
                                ct2={"address": "127.0.0.2", "service": SERVICE},
                                ct3={"address": "127.0.0.3", "service": SERVICE,
                                     "ssh": {"client_keys": [str(own_key)]}})
    known_hosts = document["ssh"]["known_hosts"]
    os.chmod(known_hosts, 0o666)
    del document["ssh"]["client_keys"]
    path = write_inventory(tmp_path / "i.yml", document)
    text = path.read_text().splitlines()
    for args in (["inventory", "check"], ["ping", "ct1"]):  # refused when the inventory loads, for every command
        run = await run_cli(*args, "--json", "--inventory", str(path), env={"HOME": str(home)})
        assert run.code == 2, run.stderr
        problems = json.loads(run.stdout)["error"]["problems"]
        assert [(p["line"], p["key"]) for p in problems] == [
            (text.index("ssh:") + 1, "ssh.client_keys"),  # not written: proofbot's default, at the ssh section
            (text.index(f"  known_hosts: {known_hosts}") + 1, "ssh.known_hosts"),
            (text.index("      client_keys:") + 1, "hosts.ct3.ssh.client_keys")]
        default, shared_file, own = (p["message"] for p in problems)
        assert default.startswith(f"client key {default_key} is readable by others (mode 644)")
        assert "(proofbot's default)" in default
        assert shared_file.startswith(f"known_hosts {known_hosts} (uid {os.getuid()}, mode 666) can be written by "
                                      "another user; it decides what proofbot, as root, trusts")
        assert own.startswith(f"client key {own_key}: directory {shared} (uid {os.getuid()}, mode 777) can be "
                              "written by another user")
    said = await run_cli("inventory", "check", "--inventory", str(path), env={"HOME": str(home)})
    assert said.stderr.splitlines()[1:] == [f"{p['file']}:{p['line']}: {p['key']}: {p['message']}" for p in problems]


async def test_a_host_with_nothing_to_check_is_named_but_a_bastion_is_not(tmp_path: Path) -> None:
    document = usable_inventory(tmp_path, bastion={"address": "127.0.0.2"}, ct1={
        "address": "127.0.0.1", "ssh": {"jump": "bastion"}, "service": SERVICE},
        ct2={"address": "127.0.0.3", "packages": {"python": "/usr/bin/python3"}},
        bastion2={"address": "127.0.0.4"}, ct3={"address": "127.0.0.5", "ssh": {"jump": "admin@127.0.0.4:22"},
                                                "service": SERVICE})
    path = write_inventory(tmp_path / "i.yml", document)
    code, _, problems = await check(path)
    assert code == 2
    assert [(p["line"], p["key"]) for p in problems] == [(path.read_text().splitlines().index("  ct2:") + 1,
                                                         "hosts.ct2")]
    assert problems[0]["message"].startswith("no service, backups or packages configured for ct2: ")
    assert "add a `service:`" in problems[0]["message"]


async def test_verify_on_a_host_with_nothing_to_check_says_why_and_what_to_add(tmp_path: Path) -> None:
    document = usable_inventory(tmp_path, ct1={"address": "127.0.0.1", "port": 9})
    path = write_inventory(tmp_path / "i.yml", document)
    run = await run_cli("verify", "ct1", "--inventory", str(path), "--db", str(tmp_path / "a.db"))
    assert run.code == 2
    assert run.stderr.splitlines() == [
        "proofbot: nothing to verify: no service, backups or packages configured for ct1",
        "  → add a `service:` (manager, unit, health_url), a `backups:` entry or `packages:` (dists or deb) "
        "to its inventory entry"]


TYPOS = """\
ssh:
  knwon_hosts: /etc/ssh/known
hosts:
  ct1:
    address: 127.0.0.1
    servce:
      manager: systemd
    packages: {dist: [sglang]}
    backups:
      b1: {dir: /srv, files: {a: /srv/a}, wacth: [/srv]}
fleet: {max_paralel: 3}
hots: {}
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(InventoryError) as raised:
        parse_inventory(text, "i.yml")
    return raised.value.message.splitlines()


def test_an_unknown_key_says_which_key_was_meant() -> None:
    assert problems_of(TYPOS) == [
        "i.yml:2: ssh.knwon_hosts: not an inventory key; did you mean `known_hosts`?",
        "i.yml:6: hosts.ct1.servce: not an inventory key; did you mean `service`?",
        "i.yml:8: hosts.ct1.packages.dist: not an inventory key; did you mean `dists`?",
        "i.yml:10: hosts.ct1.backups.b1.wacth: not an inventory key; did you mean `watch`?",
        "i.yml:11: fleet.max_paralel: not an inventory key; did you mean `max_parallel`?",
        "i.yml:12: hots: not an inventory key; did you mean `hosts`?"]


def test_an_unknown_key_like_none_lists_the_keys_there() -> None:
    [problem] = problems_of("hosts:\n  ct1:\n    address: 127.0.0.1\n    service:\n      zzz: 1\n"
                            "      manager: systemd\n      unit: u\n      health_url: http://127.0.0.1/\n")
    assert problem.startswith("i.yml:5: hosts.ct1.service.zzz: not an inventory key here; known: `manager`, `unit`")
    assert "`probe`" in problem


# Real mistakes, and the line a person fixes (PyYAML alone says the line after it for the first four).
YAML_MISTAKES = [
    ("key without its colon", "hosts:\n  ct1:\n    address 10.0.0.1\n    port: 22\n", 3, "a key missing its ': '"),
    ("no space after the colon", "hosts:\n  ct1:\n    address:10.0.0.1\n    port: 22\n", 3, "a key missing its ': '"),
    ("unclosed quote", 'hosts:\n  ct1:\n    address: "10.0.0.1\n    port: 22\n', 3, "quote on line 3"),
    ("unclosed bracket", "hosts:\n  ct1:\n    address: [127.0.0.1\n    port: 22\n", 3, "'[' on line 3"),
    ("list item without its dash", "groups:\n  gpu:\n    - ct1\n    ct2\nhosts: {}\n", 4, "simple key"),
    ("key indented too little", "hosts:\n  ct1:\n    address: 10.0.0.1\n   port: 22\n", 4, "block mapping"),
    ("key indented too far", "hosts:\n  ct1:\n    address: 10.0.0.1\n      port: 22\n", 4, "not allowed"),
    ("a tab", "hosts:\n  ct1:\n\taddress: 10.0.0.1\n", 3, "'\\t'"),
    ("a dash among keys", "hosts:\n  ct1:\n    address: 10.0.0.1\n    - port: 22\n", 4, "block mapping"),
    ("an unquoted ': ' in a value", "hosts:\n  ct1:\n    address: 10.0.0.1\n    service:\n"
     "      health_url: http://x: y\n", 5, "not allowed"),
]


@pytest.mark.parametrize(("text", "line", "words"), [case[1:] for case in YAML_MISTAKES],
                         ids=[case[0] for case in YAML_MISTAKES])
def test_a_yaml_mistake_is_reported_at_its_line(text: str, line: int, words: str) -> None:
    [problem] = problems_of(text)
    assert problem.startswith(f"i.yml:{line}:") and "not valid YAML" in problem and words in problem
