"""A bad inventory is refused with the file, the key and what is wrong; hosts come only from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from commands.errors import InventoryError, UnknownBackup, UnknownHost
from commands.inventory import load_inventory, parse_inventory
from commands.verify import VerifyPlan

SPEC_EXAMPLE = """
ssh:
  user: root
  known_hosts: ~/.ssh/known_hosts
  client_keys: [~/.ssh/id_ed25519]
  connect_timeout_s: 10
  command_timeout_s: 60
approvals:
  approvers: [U0123ABCD]
  allow_self_approval: false
  expire_after_s: 900
channels: [C0123ABCD]
hosts:
  ct129:
    address: 10.1.230.172
    port: 22
    ssh: {user: ops, command_timeout_s: 5}
    service:
      manager: systemd
      unit: sglang
      health_url: http://127.0.0.1:30000/health
      expect_flags: ["--speculative-algorithm NEXTN"]
      forbid_flags: ["--enable-ddtree"]
      ready_timeout_s: 300
      min_startup_s: 20
      probe:
        url: http://127.0.0.1:30000/v1/chat/completions
        json: {model: default, messages: [{role: user, content: "Say OK"}], max_tokens: 8}
        timeout_s: 30
        expect: "OK"
    backups:
      pre-ddtree:
        dir: /root/sglang-ddtree-backup-20260522
        files:
          spec_info.py: /root/ml-env/lib/python3.12/site-packages/sglang/srt/speculative/spec_info.py
        watch:
          - /root/ml-env/lib/python3.12/site-packages/sglang/srt/speculative
  ct130:
    address: 10.1.230.173
"""


def test_spec_example_loads_with_per_host_ssh_overrides() -> None:
    inventory = parse_inventory(SPEC_EXAMPLE, "inventory.yml")
    ct129 = inventory.host("ct129")
    assert ct129.ssh.user == "ops" and ct129.ssh.command_timeout_s == 5
    assert ct129.ssh.connect_timeout_s == 10
    assert inventory.host("ct130").ssh.user == "root"
    assert ct129.service is not None and ct129.service.probe is not None
    assert ct129.service.probe.json_body["max_tokens"] == 8
    assert inventory.channels == ["C0123ABCD"]
    assert ct129.backups["pre-ddtree"].allow_untrusted_dirs is False


def test_untrusted_dirs_are_allowed_per_backup_only() -> None:
    text = SPEC_EXAMPLE.replace("        watch:", "        allow_untrusted_dirs: true\n        watch:", 1)
    assert parse_inventory(text, "inventory.yml").host("ct129").backups["pre-ddtree"].allow_untrusted_dirs


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [(("manager: systemd", "manager: upstart"), "hosts.ct129.service.manager", "systemd"),
     (("port: 22", "port: 99999"), "hosts.ct129.port", "65535"),
     (("dir: /root/sglang", "dir: root/sglang"), "hosts.ct129.backups.pre-ddtree.dir", "absolute"),
     (("unit: sglang", "unit: 'sglang; reboot'"), "hosts.ct129.service.unit", "not a valid unit"),
     (("health_url: http://", "health_url: ftp://"), "hosts.ct129.service.health_url", "http"),
     (("      unit: sglang", "      unit: sglang\n      restart_cmd: x"), "hosts.ct129.service.restart_cmd",
      "not an inventory key"),
     (("spec_info.py: /root", "../x.py: /root"), "hosts.ct129.backups.pre-ddtree.files", "plain name"),
     (("address: 10.1.230.172", "address: '10.1.230.172; id'"), "hosts.ct129.address", "host name or IP"),
     (("        watch:", "        allow_untrusted_dirs: 'yes'\n        watch:"),
      "hosts.ct129.backups.pre-ddtree.allow_untrusted_dirs", "valid boolean")],
)
def test_bad_values_name_file_key_and_problem(edit: tuple[str, str], key: str, words: str) -> None:
    text = SPEC_EXAMPLE.replace(*edit, 1)
    with pytest.raises(InventoryError) as raised:
        parse_inventory(text, "inventory.yml")
    message = str(raised.value)
    assert re.match(rf"inventory\.yml:\d+: {re.escape(key)}", message)  # FILE:LINE: KEY
    assert words in message


def test_not_yaml_is_refused() -> None:
    with pytest.raises(InventoryError, match=r"inventory\.yml:1:8: not valid YAML: .*expected ',' or ']'"):
        parse_inventory("hosts: [unclosed", "inventory.yml")


def test_missing_hosts_key_is_refused() -> None:
    with pytest.raises(InventoryError, match="hosts: Field required"):
        parse_inventory("ssh: {user: root}\n", "inventory.yml")


@pytest.mark.parametrize("value", ["33", "{a: b}", "true"])
def test_a_key_file_list_of_the_wrong_type_is_reported_not_a_crash(value: str) -> None:
    # the unsafe-file check reads client_keys before validation; a wrong type is the validator's to report
    text = f"ssh: {{client_keys: {value}}}\nhosts: {{h1: {{address: 127.0.0.1}}}}\n"
    with pytest.raises(InventoryError, match=r"ssh\.client_keys: Input should be a valid list"):
        parse_inventory(text, "inventory.yml")


def test_missing_file_says_how_to_point_at_one(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="not found") as raised:
        load_inventory(tmp_path / "nope.yml")
    assert "PROOFBOT_INVENTORY" in raised.value.hint


def test_unknown_host_lists_the_known_ones() -> None:
    inventory = parse_inventory(SPEC_EXAMPLE, "inventory.yml")
    with pytest.raises(UnknownHost) as raised:
        inventory.host("ct129; rm -rf /")
    assert "ct129, ct130" in raised.value.hint


def test_backup_choice() -> None:
    inventory = parse_inventory(SPEC_EXAMPLE, "inventory.yml")
    assert inventory.host("ct129").backup(None)[0] == "pre-ddtree"
    with pytest.raises(UnknownBackup, match="no backups"):
        inventory.host("ct130").backup(None)
    with pytest.raises(UnknownBackup, match="unknown backup"):
        inventory.host("ct129").backup("nope")


PACKAGES_EXAMPLE = """
packages:
  python: /root/ml-env/bin/python
  dists: [sglang, Sgl_Kernel]
hosts:
  ct129:
    address: 10.1.230.172
  ct130:
    address: 10.1.230.173
    packages: {python: /opt/env/bin/python3}
  ct131:
    address: 10.1.230.174
    packages: {dists: [flash.attn, flash-attn]}
"""


def test_packages_defaults_merge_per_host_key_by_key_and_names_are_normalised() -> None:
    inventory = parse_inventory(PACKAGES_EXAMPLE, "inventory.yml")
    ct129, ct130, ct131 = (inventory.host(name).packages for name in ("ct129", "ct130", "ct131"))
    assert ct129 is not None and ct129.python == "/root/ml-env/bin/python"
    assert ct129.dists == ["sglang", "sgl-kernel"]
    assert ct130 is not None and ct130.python == "/opt/env/bin/python3" and ct130.dists == ["sglang", "sgl-kernel"]
    assert ct131 is not None and ct131.python == "/root/ml-env/bin/python" and ct131.dists == ["flash-attn"]
    assert parse_inventory(SPEC_EXAMPLE, "inventory.yml").host("ct129").packages is None


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [(("python: /root/ml-env/bin/python", "python: ml-env/bin/python"), "hosts.ct129.packages.python", "absolute"),
     (("dists: [sglang, Sgl_Kernel]", "dists: ['sglang; id']"), "hosts.ct129.packages.dists", "distribution name"),
     (("  python: /root/ml-env/bin/python\n", ""), "hosts.ct129.packages.python", "required to check dists"),
     (("  dists: [sglang, Sgl_Kernel]", "  deb: [openssh-server, 'nginx; id']"), "hosts.ct129.packages.deb",
      "not a Debian package name"),
     (("  dists: [sglang, Sgl_Kernel]", "  deb: [Nginx]"), "hosts.ct129.packages.deb", "not a Debian package name"),
     (("  dists: [sglang, Sgl_Kernel]", "  deb: ['libc6:amd64 x']"), "hosts.ct129.packages.deb", "Debian"),
     (("packages: {dists: [flash.attn, flash-attn]}", "packages: [flash-attn]"), "hosts.ct131.packages",
      "valid dictionary"),
     (("  dists:", "  dist:"), "hosts.ct129.packages.dist", "not an inventory key")],
)
def test_bad_packages_name_file_key_and_problem(edit: tuple[str, str], key: str, words: str) -> None:
    with pytest.raises(InventoryError) as raised:
        parse_inventory(PACKAGES_EXAMPLE.replace(*edit, 1), "inventory.yml")
    assert re.match(rf"inventory\.yml:\d+: {re.escape(key)}", str(raised.value))
    assert words in str(raised.value)


def test_debian_packages_need_no_python_and_keep_their_arch_qualifier() -> None:
    text = """
hosts:
  ct129:
    address: 10.1.230.172
    packages: {deb: [nginx, openssh-server, libc6:amd64, g++-12, nginx]}
"""
    host = parse_inventory(text, "inventory.yml").host("ct129")
    assert host.packages is not None and host.packages.python is None
    assert host.packages.deb == ["nginx", "openssh-server", "libc6:amd64", "g++-12"]
    assert VerifyPlan.for_host(host, None).check_names() == [
        "package:deb:nginx", "package:deb:openssh-server", "package:deb:libc6:amd64", "package:deb:g++-12"]


def test_every_problem_at_once_each_said_once_at_its_line() -> None:
    text = """\
ssh:
  user: Not A User
hosts:
  ct1:
    address: 10.0.0.1
  ct2:
    address: 10.0.0.2
    port: 0
  ct1:
    address: 10.0.0.3
groups:
  gpu: [ct2]
"""
    with pytest.raises(InventoryError) as raised:
        parse_inventory(text, "inv.yml")
    assert raised.value.message.splitlines() == [
        "inv.yml:2: ssh.user: not a valid user name: 'Not A User'",  # once, not again for each host
        "inv.yml:8: hosts.ct2.port: Input should be greater than or equal to 1",
        "inv.yml:9: hosts.ct1: written twice (first on line 4); YAML keeps only the last",
    ]  # gpu's member ct2 is a host with a problem of its own: not reported as unknown
    assert raised.value.hint == "3 problems in inv.yml"
    assert [problem["line"] for problem in raised.value.problems] == [2, 8, 9]


def test_a_bad_jump_is_one_problem_among_the_others() -> None:
    text = "hosts:\n  ct1:\n    address: 10.0.0.1\n    ssh: {jump: 'x:0'}\n  ct2:\n    address: 10.0.0.2\n    port: 0\n"
    with pytest.raises(InventoryError) as raised:
        parse_inventory(text, "inv.yml")
    assert raised.value.message.splitlines() == [
        "inv.yml:4: hosts.ct1.ssh.jump: hop 'x:0': the port must be 1-65535",
        "inv.yml:7: hosts.ct2.port: Input should be greater than or equal to 1"]
