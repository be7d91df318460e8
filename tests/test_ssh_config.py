"""Tier 1: the operator's ssh config (``ssh.config``, opt-in) under the inventory, and ``proofbot ping -v``.

Which value wins and where each came from is proofbot's own logic (asyncssh only parses the file),
so it is tested against the loopback host; what a real sshd decides is in tests/test_ssh_trust_lab.py.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.demo.host import DemoHost
from commands.errors import BastionUnreachable, HostKeyNotVerified, InventoryError
from commands.inventory import Host, parse_inventory
from commands.ssh import connect
from tests.conftest import run_cli, write_inventory


def operator_config(host: DemoHost, tmp_path: Path, extra: str = "") -> Path:
    """An ~/.ssh/config as an operator writes it: Host patterns, HostName, Port, User, IdentityFile."""
    known = tmp_path / "fleet_known_hosts"
    known.write_text(host.known_hosts.read_text())
    config = tmp_path / "ssh_config"
    config.write_text(
        "# my fleet\n"
        "Host gpu-*\n"
        "    HostName 127.0.0.1\n"
        f"    Port {host.ssh_port}\n"
        f"    User {os.environ.get('USER') or 'root'}\n"
        f"    IdentityFile {host.client_key}\n"
        f"    UserKnownHostsFile {known} ~/.ssh/no_such_known_hosts\n"
        "    ServerAliveInterval 30\n"
        f"{extra}"
        "\n"
        "Host *\n"
        "    User nobody\n"
        "    Port 2222\n"
    )
    config.chmod(0o600)
    return config


def alias_only(host: DemoHost, config: Path, alias: str = "gpu-1", **ssh: Any) -> dict[str, Any]:
    """The host's inventory naming only an alias: no address, port, user, keys or known_hosts."""
    document = host.inventory()
    entry = document["hosts"].pop(host.name)
    del entry["address"], entry["port"]
    document["hosts"][alias] = entry
    document["ssh"] = {"config": str(config), "connect_timeout_s": 5, "command_timeout_s": 20, **ssh}
    return document


def host_of(document: dict[str, Any], name: str = "gpu-1") -> Host:
    return parse_inventory(yaml.safe_dump(document), "inv.yml").host(name)


async def test_an_alias_named_only_in_the_operator_config_is_reached(clean_host: DemoHost, tmp_path: Path) -> None:
    config = operator_config(clean_host, tmp_path)
    host = host_of(alias_only(clean_host, config))
    assert (host.address, host.port) == ("127.0.0.1", clean_host.ssh_port)
    assert host.origins["address"] == f"{config} line 3 (Host gpu-*)"
    assert host.origins["port"] == f"{config} line 4 (Host gpu-*)"
    assert host.origins["known_hosts"] == f"{config} line 7 (Host gpu-*)"
    async with connect(host) as conn:
        assert (await conn.run(["true"])).exit_status == 0


async def test_values_written_in_the_inventory_win_and_defaults_do_not(clean_host: DemoHost, tmp_path: Path) -> None:
    config = operator_config(clean_host, tmp_path)
    top_user = host_of(alias_only(clean_host, config, user="svc"))
    assert top_user.ssh.user == "svc" and top_user.origins["user"] == "inventory ssh.user"
    document = alias_only(clean_host, config, user="svc")
    document["hosts"]["gpu-1"]["ssh"] = {"user": "ops"}
    document["hosts"]["gpu-1"]["port"] = 2200
    own = host_of(document)
    assert (own.ssh.user, own.origins["user"]) == ("ops", "inventory hosts.gpu-1.ssh.user")
    assert (own.port, own.origins["port"]) == (2200, "inventory hosts.gpu-1.port")
    # Not written: the config's first match (Host gpu-*) wins over `Host *` and over proofbot's defaults.
    plain = host_of(alias_only(clean_host, config))
    assert plain.ssh.user == (os.environ.get("USER") or "root") and plain.origins["user"].endswith("(Host gpu-*)")
    other = host_of(alias_only(clean_host, config, alias="web-1"), "web-1")
    assert (other.address, other.ssh.user, other.port) == ("web-1", "nobody", 2222)
    assert other.origins["address"] == "the host's name (no HostName in the ssh config)"
    assert other.origins["client_keys"] == "default"


def test_without_ssh_config_the_inventory_is_read_as_before(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host ct1\n  HostName 10.9.9.9\n  User nobody\n")
    no_config = {"hosts": {"ct1": {"address": "127.0.0.1"}}}
    host = parse_inventory(yaml.safe_dump(no_config), "i.yml").host("ct1")
    assert (host.address, host.port, host.ssh.user) == ("127.0.0.1", 22, "root")
    assert host.origins["user"] == "default" and "config" not in host.origins
    with pytest.raises(InventoryError, match=r"hosts\.ct1\.address: Field required"):
        parse_inventory(yaml.safe_dump({"hosts": {"ct1": {"port": 22}}}), "i.yml")


@pytest.mark.parametrize(("line", "words"), [
    ("    ProxyCommand nc %h %p\n", "sets ProxyCommand: proofbot runs as root"),
    ("    UserKnownHostsFile /dev/null\n", "known_hosts /dev/null"),
])
def test_config_lines_that_would_run_a_command_or_trust_any_key_are_refused(
        clean_host: DemoHost, tmp_path: Path, line: str, words: str) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-*\n    HostName 127.0.0.1\n" + line)
    config.chmod(0o600)
    with pytest.raises(InventoryError, match=words) as refused:
        host_of(alias_only(clean_host, config))
    assert f"{config} line 3 (Host gpu-*)" in str(refused.value)


def test_match_exec_is_refused_and_its_command_never_runs(clean_host: DemoHost, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    config = tmp_path / "ssh_config"
    config.write_text(f'Match exec "touch {marker}"\n    User nobody\n')
    config.chmod(0o600)
    with pytest.raises(InventoryError, match="Match exec would run a command as root"):
        host_of(alias_only(clean_host, config))
    assert not marker.exists()


def test_a_config_others_can_write_is_refused(clean_host: DemoHost, tmp_path: Path) -> None:
    config = operator_config(clean_host, tmp_path)
    config.chmod(0o622)
    with pytest.raises(InventoryError, match=r"Bad owner or permissions on .*ssh_config"):
        host_of(alias_only(clean_host, config))


async def test_config_cannot_weaken_host_key_checking(clean_host: DemoHost, tmp_path: Path) -> None:
    """StrictHostKeyChecking no and ForwardAgent yes are not taken; a wrong key is still refused."""
    config = operator_config(clean_host, tmp_path, extra="    StrictHostKeyChecking no\n    ForwardAgent yes\n")
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"[127.0.0.1]:{clean_host.ssh_port} ssh-ed25519 "
                     "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
    host = host_of(alias_only(clean_host, config, known_hosts=str(wrong)))
    assert "ForwardAgent" in host.origins["ignored"]
    with pytest.raises(HostKeyNotVerified, match="host key not verified against"):
        async with connect(host):
            pass


async def test_ping_v_shows_each_value_and_where_it_came_from(clean_host: DemoHost, tmp_path: Path) -> None:
    config = operator_config(clean_host, tmp_path)
    inventory = write_inventory(tmp_path / "i.yml", alias_only(clean_host, config, user=os.environ.get("USER")
                                                                or "root"))
    text = await run_cli("ping", "gpu-1", "-v", "--inventory", str(inventory))
    assert text.code == 0, text.stdout + text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines()[1:]}
    assert lines["address"].endswith(f"127.0.0.1  ← {config} line 3 (Host gpu-*)")
    assert lines["user"].endswith("← inventory ssh.user")
    assert lines["identity_files"].endswith(f"{clean_host.client_key}  ← {config} line 6 (Host gpu-*)")
    assert "no_such_known_hosts (missing)" in lines["known_hosts"]
    assert lines["agent_forwarding"].split()[1:4] == ["False", "←", "never"]
    assert lines["ciphers"].split()[1:3] == ["aes128-gcm@openssh.com,", "aes256-gcm@openssh.com,"]
    assert "ServerAliveInterval" in lines["ignored_from_config"]
    report = await run_cli("ping", "gpu-1", "-v", "--json", "--inventory", str(inventory))
    ssh = json.loads(report.stdout)["hosts"][0]["ssh"]
    assert ssh["port"] == {"value": clean_host.ssh_port, "origin": f"{config} line 4 (Host gpu-*)"}
    assert ssh["ssh_config"]["origin"] == "inventory ssh.config"
    plain = await run_cli("ping", "gpu-1", "--json", "--inventory", str(inventory))
    assert "ssh" not in json.loads(plain.stdout)["hosts"][0]


def behind_config_bastion(host: DemoHost, tmp_path: Path, jump: str = "ops@bastion",
                          bastion_known_hosts: Path | None = None) -> Path:
    """The operator config with `ProxyJump ops@bastion` (line 15) for gpu-*, the bastion resolved through it too:
    as ssh runs `ssh -l ops bastion` for the hop, only the bastion's own block gives its keys and known_hosts."""
    config = operator_config(host, tmp_path, extra=f"    ProxyJump {jump}\n")
    known = bastion_known_hosts or tmp_path / "fleet_known_hosts"
    # First match wins, as in OpenSSH: the bastion's block goes before `Host *`.
    config.write_text(f"Host bastion\n    HostName 127.0.0.1\n    Port {host.ssh_port}\n"
                      f"    IdentityFile {host.client_key}\n    UserKnownHostsFile {known}\n\n" + config.read_text())
    return config


async def test_the_configs_proxyjump_is_a_shared_bastion_whose_key_is_checked_too(clean_host: DemoHost,
                                                                                 tmp_path: Path) -> None:
    """ProxyJump bastion becomes the host's ssh.jump: verify passes every check through it; two hosts behind it
    at once log into the bastion once (three logins, not four); the bastion's key is checked."""
    config = behind_config_bastion(clean_host, tmp_path)
    document = alias_only(clean_host, config)
    document["hosts"]["gpu-2"] = copy.deepcopy(document["hosts"]["gpu-1"])
    fleet = parse_inventory(yaml.safe_dump(document), "inv.yml")
    host, other = fleet.host("gpu-1"), fleet.host("gpu-2")
    assert [(hop.name, hop.address, hop.port) for hop in host.ssh.jump] == [("ops@bastion", "127.0.0.1",
                                                                              clean_host.ssh_port)]
    # The hop logs in as ssh's `ssh -l ops bastion` would: its own block's key and known_hosts, not the host's.
    hop = host.ssh.jump[0].ssh
    assert (hop.user, hop.client_keys, hop.known_hosts) == ("ops", [str(clean_host.client_key)],
                                                            [str(tmp_path / "fleet_known_hosts")])
    assert host.origins["jump"] == f"{config} line 15 (Host gpu-*): ops@bastion"
    inventory = write_inventory(tmp_path / "i.yml", document)
    ping = await run_cli("ping", "gpu-1", "-v", "--inventory", str(inventory))
    jump_line = next(line for line in ping.stdout.splitlines() if line.split()[0] == "jump")
    assert jump_line.endswith(f" ops@127.0.0.1:{clean_host.ssh_port}  ← {config} line 15 (Host gpu-*): ops@bastion"), \
        jump_line
    run = await run_cli("verify", "gpu-1", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 0, run.stdout + run.stderr
    statuses = {check["name"]: check["status"] for check in json.loads(run.stdout)["checks"]}
    assert len(statuses) == 8 and set(statuses.values()) == {"pass"}, statuses  # health and probe too, via the hop
    before = clean_host.logins.total
    async with connect(host) as first, connect(other) as second:
        assert [(await conn.run(["true"])).exit_status for conn in (first, second)] == [0, 0]
        # Each host's login came through the bastion: it was asked to forward to the host's sshd.
        assert clean_host.logins.forwards.count(("127.0.0.1", clean_host.ssh_port)) >= 2
    assert clean_host.logins.total == before + 3
    unknown = tmp_path / "empty_known_hosts"
    unknown.write_text("")
    stranger = host_of(alias_only(clean_host, behind_config_bastion(clean_host, tmp_path, bastion_known_hosts=unknown)))
    with pytest.raises(BastionUnreachable, match=rf"^could not reach the bastion ops@bastion "
                                                 rf"\(127\.0\.0\.1:{clean_host.ssh_port}\): host key not verified "
                                                 rf"against {unknown}: "):
        async with connect(stranger):
            pass


def test_a_jump_the_inventory_writes_wins_over_the_configs_proxyjump(clean_host: DemoHost, tmp_path: Path) -> None:
    """Even `jump: []`; and `Host *`-style ProxyJump never makes the bastion jump through itself."""
    config = behind_config_bastion(clean_host, tmp_path)
    document = alias_only(clean_host, config, jump="admin@10.0.0.9")
    host = host_of(document)
    assert [(hop.name, hop.address, hop.ssh.user) for hop in host.ssh.jump] == [("admin@10.0.0.9", "10.0.0.9",
                                                                                   "admin")]
    assert host.origins["jump"] == "inventory ssh.jump"
    del document["ssh"]["jump"]
    document["hosts"]["gpu-1"]["ssh"] = {"jump": []}  # written, so it wins: no hop
    opted_out = host_of(document)
    assert (opted_out.ssh.jump, opted_out.origins["jump"]) == ((), "inventory hosts.gpu-1.ssh.jump")
    del document["hosts"]["gpu-1"]["ssh"]
    assert [hop.name for hop in host_of(document).ssh.jump] == ["ops@bastion"]
    # `Host *` / `ProxyJump bastion` makes ssh reach the bastion through itself, endlessly: refused, with the fix.
    loop = tmp_path / "loop_config"
    loop.write_text("Host bastion\n    HostName 10.0.0.5\n\nHost *\n    ProxyJump bastion\n")
    loop.chmod(0o600)
    document["hosts"]["bastion"] = copy.deepcopy(document["hosts"]["gpu-1"])
    document["ssh"]["config"] = str(loop)
    with pytest.raises(InventoryError, match=r"hosts\.bastion: ProxyJump hop 'bastion' .*line 5 \(Host \*\)\).*"
                                             r"its own ProxyJump") as refused:
        parse_inventory(yaml.safe_dump(document), "inv.yml")
    assert "(`Host * !bastion`)" in str(refused.value)
    loop.write_text("Host bastion\n    HostName 10.0.0.5\n\nHost * !bastion\n    ProxyJump bastion\n")
    fleet = parse_inventory(yaml.safe_dump(document), "inv.yml")
    assert fleet.host("bastion").ssh.jump == ()
    assert [(hop.name, hop.address) for hop in fleet.host("gpu-1").ssh.jump] == [("bastion", "10.0.0.5")]


def test_a_proxyjump_that_reaches_one_hop_twice_is_refused_with_its_line(clean_host: DemoHost, tmp_path: Path) -> None:
    config = behind_config_bastion(clean_host, tmp_path, jump="ops@bastion,bastion")
    with pytest.raises(InventoryError, match=rf"ProxyJump \({config} line 15 \(Host gpu-\*\)\) reaches "
                                             rf"127\.0\.0\.1:{clean_host.ssh_port} twice"):
        host_of(alias_only(clean_host, config))


async def test_several_known_hosts_files_are_named_in_what_verify_says_to_do(clean_host: DemoHost,
                                                                            tmp_path: Path) -> None:
    first, second = tmp_path / "known_a", tmp_path / "known_b"
    first.write_text("# a comment, no key\n")
    document = clean_host.inventory()
    document["ssh"]["known_hosts"] = [str(first), str(second)]
    inventory = write_inventory(tmp_path / "i.yml", document)
    run = await run_cli("verify", clean_host.name, "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 3, run.stdout + run.stderr
    assert f"host key not verified against {first}, {second}" in run.stdout
    assert f"host key is in {first}, {second}, then" in run.stdout
