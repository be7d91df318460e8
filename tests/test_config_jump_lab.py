"""Tier 2: hosts named only in an operator's ssh config, reached through its ``ProxyJump`` bastion (a stock
OpenSSH sshd, the only route to them), go the inventory ``ssh.jump`` way: every check passes over ONE
bastion login for the run, also when the hosts (the bastion too) are trusted only through a host CA's
``@cert-authority`` line; and with the bastion stopped every host is the same one error naming it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.lab import net
from tests.lab.bastion import BastionLab, running_bastion_lab
from tests.lab.host_ca import new_host_ca, sign_host_key
from tests.test_jump_lab import all_pass_over_one_bastion_login, parsed, verify_each

pytestmark = pytest.mark.tier2

BEHIND = 4
JUMPBOX = "jumpbox"  # the bastion's alias in the operator's config (the lab calls it `bastion`)


@pytest.fixture(scope="module")
def lab() -> Iterator[BastionLab]:
    with running_bastion_lab(BEHIND) as bastion_lab:
        yield bastion_lab


@pytest.fixture(scope="module")
def ca_known_hosts(lab: BastionLab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every host's key (the bastion's too) signed by a throwaway host CA; a known_hosts with only its
    @cert-authority line (the hosts keep their plain keys, which the other tests here trust)."""
    work = tmp_path_factory.mktemp("host_ca")
    ca_pub = new_host_ca(work / "host_ca")
    for name, host in lab.hosts.items():
        sign_host_key(host, work / "host_ca", [host.address, name])
    known = work / "known_hosts"
    known.write_text(f"# the fleet's host CA, and nothing else\n@cert-authority 10.231.* {ca_pub}\n")
    return known


def operator_config(lab: BastionLab, path: Path, known_hosts: Path | None = None) -> Path:
    """~/.ssh/config as an operator keeps it: one block per GPU host, the bastion's, `Host gpu*` jumping."""
    hosts = "".join(f"Host {name}\n    HostName {lab.hosts[name].address}\n\n" for name in lab.behind)
    path.write_text(
        "# the GPU fleet: reachable only through the bastion\n"
        f"{hosts}"
        f"Host {JUMPBOX}\n    HostName {lab.bastion.address}\n\n"
        f"Host gpu*\n    ProxyJump {JUMPBOX}\n\n"
        f"Host *\n    User root\n    IdentityFile {lab.client_key}\n"
        f"    UserKnownHostsFile {known_hosts or lab.known_hosts}\n"
        "    ServerAliveInterval 30\n")
    path.chmod(0o600)
    return path


def alias_inventory(lab: BastionLab, config: Path) -> dict[str, Any]:
    """The hosts behind the bastion by alias only: no address, port, user, key, known_hosts or jump."""
    document = lab.inventory()
    document["hosts"] = {name: document["hosts"][name] for name in lab.behind}
    for entry in document["hosts"].values():
        del entry["address"], entry["port"], entry["ssh"]
    document["ssh"] = {"config": str(config), "connect_timeout_s": 5, "command_timeout_s": 20}
    return document


@contextmanager
def bastion_stopped(lab: BastionLab) -> Iterator[None]:
    lab.bastion.run(["supervisorctl", "stop", "sshd"])
    try:
        yield
    finally:
        lab.bastion.run(["supervisorctl", "start", "sshd"])
        net.wait_until("the bastion's sshd answers again",
                       lambda: net.ssh_banner(lab.bastion.address, 22).startswith(b"SSH-"), time.monotonic() + 30)


async def test_hosts_named_only_in_the_ssh_config_pass_every_check_over_one_bastion_login(
        lab: BastionLab, tmp_path: Path) -> None:
    inventory = parsed(alias_inventory(lab, operator_config(lab, tmp_path / "ssh_config")))
    assert {(hop.name, hop.address) for name in lab.behind for hop in inventory.host(name).ssh.jump} == {
        (JUMPBOX, lab.bastion.address)}
    await all_pass_over_one_bastion_login(lab, inventory, tmp_path)


async def test_a_fleet_reached_only_through_a_bastion_trusted_only_through_a_host_ca_named_only_in_ssh_config(
        lab: BastionLab, ca_known_hosts: Path, tmp_path: Path) -> None:
    """Issue 13's whole case at once: no address, no host key and no jump in the inventory."""
    inventory = parsed(alias_inventory(lab, operator_config(lab, tmp_path / "ssh_config", ca_known_hosts)))
    def files(value: str | list[str]) -> list[str]:
        return [value] if isinstance(value, str) else list(value)

    for name in lab.behind:
        host = inventory.host(name)
        assert files(host.ssh.known_hosts) == [str(ca_known_hosts)]
        assert [files(hop.ssh.known_hosts) for hop in host.ssh.jump] == [[str(ca_known_hosts)]]
    await all_pass_over_one_bastion_login(lab, inventory, tmp_path)


async def test_with_the_configs_bastion_stopped_every_host_is_one_error_naming_it(
        lab: BastionLab, tmp_path: Path) -> None:
    inventory = parsed(alias_inventory(lab, operator_config(lab, tmp_path / "ssh_config")))
    with bastion_stopped(lab):
        results = await verify_each(inventory, lab.behind, tmp_path)
    assert [r.verdict for r in results] == ["error"] * BEHIND
    said = {result.checks[0].summary for result in results}
    assert len(said) == 1, said
    (message,) = said
    assert message.startswith(f"could not check: could not reach the bastion {JUMPBOX} "
                              f"({lab.bastion.address}:22): cannot connect: "), message
