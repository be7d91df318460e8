"""Tier 2: hosts named only in an operator's ssh config, reached through its ``ProxyJump`` bastion (a stock
OpenSSH sshd, the only route to them), go the inventory ``ssh.jump`` way: every check passes over ONE
bastion login for the run, and with the bastion stopped every host is the same one error naming it.
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
from tests.test_jump_lab import all_pass_over_one_bastion_login, parsed, verify_each

pytestmark = pytest.mark.tier2

BEHIND = 4
JUMPBOX = "jumpbox"  # the bastion's alias in the operator's config (the lab calls it `bastion`)


@pytest.fixture(scope="module")
def lab() -> Iterator[BastionLab]:
    with running_bastion_lab(BEHIND) as bastion_lab:
        yield bastion_lab


def operator_config(lab: BastionLab, path: Path) -> Path:
    """~/.ssh/config as an operator keeps it: one block per GPU host, the bastion's, `Host gpu*` jumping."""
    hosts = "".join(f"Host {name}\n    HostName {lab.hosts[name].address}\n\n" for name in lab.behind)
    path.write_text(
        "# the GPU fleet: reachable only through the bastion\n"
        f"{hosts}"
        f"Host {JUMPBOX}\n    HostName {lab.bastion.address}\n\n"
        f"Host gpu*\n    ProxyJump {JUMPBOX}\n\n"
        f"Host *\n    User root\n    IdentityFile {lab.client_key}\n    UserKnownHostsFile {lab.known_hosts}\n"
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
