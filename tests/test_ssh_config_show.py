"""Tier 1: ``proofbot inventory show HOST`` (what ``ssh -G`` is to OpenSSH), and the owner/mode checks on the
files that decide where proofbot connects and what it trusts (Included configs, known_hosts, keys, certificates).
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.errors import InventoryError
from commands.inventory import parse_inventory
from commands.ssh_config.files import UNSAFE_ADVICE
from tests.conftest import run_cli, write_inventory


def fleet_config(tmp_path: Path) -> Path:
    known = tmp_path / "fleet_known_hosts"
    known.write_text("")
    key = tmp_path / "fleet_key"
    key.write_text("")
    key.chmod(0o600)
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host bastion\n"
        "    HostName 10.0.0.2\n"
        f"    UserKnownHostsFile {known}\n"
        "Host gpu-*\n"
        "    HostName %h.fleet.test\n"
        "    HostKeyAlias GPU-Alias\n"
        "    Port 2222\n"
        f"    GlobalKnownHostsFile {tmp_path}/global_known_hosts\n"
        "    ProxyJump ops@bastion\n"
        "    ServerAliveInterval 30\n"
        "Host *\n"
        f"    IdentityFile {key}\n"
        f"    UserKnownHostsFile {known}\n")
    config.chmod(0o600)
    return config


def document(config: Path, **ssh: Any) -> dict[str, Any]:
    return {"ssh": {"config": str(config), **ssh}, "hosts": {"gpu-1": {}, "plain": {"address": "10.9.9.9"}}}


async def test_inventory_show_prints_every_value_and_the_line_it_came_from(tmp_path: Path) -> None:
    config = fleet_config(tmp_path)
    inventory = write_inventory(tmp_path / "i.yml", document(config, user="deploy"))
    shown = await run_cli("inventory", "show", "gpu-1", "--json", "--inventory", str(inventory))
    assert shown.code == 0, shown.stdout + shown.stderr
    report = json.loads(shown.stdout)
    assert report["schema_version"] == 1 and report["host"] == "gpu-1"
    ssh = report["ssh"]
    assert ssh["address"] == {"value": "gpu-1.fleet.test", "origin": f"{config} line 5 (Host gpu-*)"}
    assert ssh["port"] == {"value": 2222, "origin": f"{config} line 7 (Host gpu-*)"}
    assert ssh["user"] == {"value": "deploy", "origin": "inventory ssh.user"}
    assert ssh["identity_files"] == {"value": [str(tmp_path / "fleet_key")], "origin": f"{config} line 12 (Host *)"}
    assert ssh["known_hosts"]["value"] == [str(tmp_path / "fleet_known_hosts")]
    assert ssh["global_known_hosts"] == {"value": [f"{tmp_path}/global_known_hosts"],
                                         "origin": f"{config} line 8 (Host gpu-*)"}
    assert ssh["host_key_alias"] == {"value": "gpu-alias", "origin": f"{config} line 6 (Host gpu-*)"}
    [hop] = ssh["jump"]["value"]
    assert (hop["name"], hop["address"], hop["port"], hop["user"]) == ("ops@bastion", "10.0.0.2", 22, "ops")
    assert ssh["jump"]["origin"] == f"{config} line 9 (Host gpu-*): ops@bastion"
    assert hop["trust"]["looked_up_as"] == "10.0.0.2"
    assert ssh["not_taken"]["value"] == [f"ServerAliveInterval ({config} line 10)"]
    # The trust rules: HostKeyAlias alone is what known_hosts is searched for, port or not (sshconnect.c
    # get_hostfile_hostname_ipaddr), exactly the name the connection's decision looks up.
    assert report["trust"]["looked_up_as"] == "gpu-alias"
    assert report["trust"]["files"] == [str(tmp_path / "fleet_known_hosts"), f"{tmp_path}/global_known_hosts"]
    text = await run_cli("inventory", "show", "gpu-1", "--inventory", str(inventory))
    assert text.code == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines()[1:] if line.strip()}
    assert lines["address"].endswith(f"gpu-1.fleet.test  ← {config} line 5 (Host gpu-*)")
    assert lines["host_key_alias"].endswith(f"gpu-alias  ← {config} line 6 (Host gpu-*)")
    assert "looked up as gpu-alias in" in lines["trust:"]


async def test_inventory_show_of_an_unknown_host_is_a_usage_error(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "i.yml", document(fleet_config(tmp_path)))
    shown = await run_cli("inventory", "show", "nope", "--json", "--inventory", str(inventory))
    assert shown.code == 2
    assert json.loads(shown.stdout)["error"]["message"] == "unknown host 'nope'"


async def test_a_config_that_includes_itself_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(f"Include {config}\nHost *\n    User ops\n")
    config.chmod(0o600)
    inventory = write_inventory(tmp_path / "i.yml", document(config))
    checked = await run_cli("inventory", "check", "--inventory", str(inventory))
    assert checked.code == 2
    assert "Traceback" not in checked.stderr
    assert f"{config} line 1: Include nests deeper than 16 files" in checked.stderr


@pytest.mark.parametrize(("key", "mode", "owner", "words"), [
    ("known_hosts", 0o666, None, "can be written by another user"),
    ("known_hosts", 0o644, "nobody", "can be written by another user"),
    ("client_keys", 0o644, None, "UNPROTECTED PRIVATE KEY FILE"),
    ("client_certs", 0o646, None, "can be written by another user"),
])
def test_files_another_user_could_write_are_refused_at_load(tmp_path: Path, key: str, mode: int,
                                                            owner: str | None, words: str) -> None:
    path = tmp_path / key
    path.write_text("")
    path.chmod(mode)
    if owner:
        os.chown(path, pwd.getpwnam(owner).pw_uid, -1)
    written: Any = str(path) if key == "known_hosts" else [str(path)]
    inventory = {"ssh": {key: written}, "hosts": {"ct1": {"address": "127.0.0.1"}}}
    with pytest.raises(InventoryError, match=rf"i\.yml:\d+: ssh\.{key}: [a-z_ ]+ {path}.*{words}"):
        parse_inventory(yaml.safe_dump(inventory), "i.yml")
    path.chmod(0o600)
    os.chown(path, os.getuid(), -1)
    assert parse_inventory(yaml.safe_dump(inventory), "i.yml").host("ct1").origins[key] == f"inventory ssh.{key}"


def test_a_file_the_config_names_is_refused_once_at_the_config_key_with_its_line(tmp_path: Path) -> None:
    config = fleet_config(tmp_path)
    known = tmp_path / "fleet_known_hosts"
    known.chmod(0o666)
    text = yaml.safe_dump(document(config), sort_keys=False)
    with pytest.raises(InventoryError) as raised:
        parse_inventory(text, "i.yml")
    lines = raised.value.message.splitlines()
    unsafe = f"known_hosts {known} (uid {os.getuid()}, mode 666) can be written by another user"
    # gpu-1 and plain both take it from `Host *`: said once, at the inventory key that names the config
    assert lines == [f"i.yml:2: ssh.config: {unsafe} ({config} line 13 (Host *)); {UNSAFE_ADVICE}"]


def test_a_directory_others_can_write_is_refused_a_sticky_one_is_not(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    known = shared / "known_hosts"
    known.write_text("")
    inventory = {"ssh": {"known_hosts": str(known)}, "hosts": {"ct1": {"address": "127.0.0.1"}}}
    shared.chmod(0o777)
    with pytest.raises(InventoryError, match=rf"directory {shared} \(uid 0, mode 777\) can be written by another"):
        parse_inventory(yaml.safe_dump(inventory), "i.yml")
    shared.chmod(0o1777)  # as /tmp: no one else can replace our file in it
    assert parse_inventory(yaml.safe_dump(inventory), "i.yml").host("ct1").ssh.known_hosts == str(known)


def test_a_config_line_that_changes_trust_is_refused_with_its_line(tmp_path: Path) -> None:
    config = fleet_config(tmp_path)
    config.write_text(config.read_text() + "    VerifyHostKeyDNS yes\n")
    with pytest.raises(InventoryError, match=rf"ssh config {config} line 14: VerifyHostKeyDNS yes: VerifyHostKeyDNS "
                                             "trusts host keys from DNS"):
        parse_inventory(yaml.safe_dump(document(config)), "i.yml")
