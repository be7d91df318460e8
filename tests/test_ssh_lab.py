"""Tier 2: the SSH boundary against a real OpenSSH sshd: `ssh.user` is who proofbot logs in as, and a user
or client key the host refuses is `AuthenticationFailed` (exit 3 from the CLI) naming the host.

The tier-1 server accepts any user name, so only a real sshd can show that the user is sent at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.errors import AuthenticationFailed
from commands.inventory import Host, parse_inventory
from commands.ssh import connect
from tests.conftest import run_cli, write_inventory
from tests.lab.common import Scenario, make_keypair
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab

HOST = "ct180"
WRONG_USER = "nobody"  # exists on the host, but root's authorized_keys is not for it


@pytest.fixture(scope="module")
def netns_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {HOST: Scenario()}) as lab:
        yield lab


def document(lab: NetnsLab, *, host_ssh: dict[str, Any] | None = None, **ssh: Any) -> dict[str, Any]:
    """The lab's inventory with ``ssh`` defaults changed and ``host_ssh`` as the host's own overrides."""
    doc = lab.inventory()
    doc["ssh"].update(ssh)
    if host_ssh is not None:
        doc["hosts"][HOST]["ssh"] = host_ssh
    return doc


def host_of(doc: dict[str, Any]) -> Host:
    return parse_inventory(yaml.safe_dump(doc), "lab.yml").host(HOST)


async def logged_in_as(doc: dict[str, Any]) -> str:
    async with connect(host_of(doc)) as conn:
        return (await conn.run(["id", "-un"])).text.strip()


async def refused(doc: dict[str, Any], tmp_path: Path) -> AuthenticationFailed:
    """The core raises AuthenticationFailed; the CLI exits 3 with every check an error naming the host."""
    with pytest.raises(AuthenticationFailed) as raised:
        await logged_in_as(doc)
    assert str(raised.value).startswith(f"{HOST} ("), str(raised.value)
    inventory = write_inventory(tmp_path / "inventory.yml", doc)
    run = await run_cli("verify", HOST, "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 3, run.stdout + run.stderr
    checks = json.loads(run.stdout)["checks"]
    assert checks and {check["status"] for check in checks} == {"error"}
    first, *rest = checks  # the cause is said once, on the first check; the others point to it
    assert f"{HOST} (" in first["summary"] and "was refused" in first["summary"], first
    assert all(f"the same cause as `{first['name']}`" in check["summary"] for check in rest), rest
    return raised.value


@pytest.mark.tier2
async def test_the_right_user_logs_in_as_that_user(netns_lab: NetnsLab) -> None:
    assert await logged_in_as(document(netns_lab, user="root")) == "root"


@pytest.mark.tier2
async def test_a_per_host_user_overrides_the_default(netns_lab: NetnsLab) -> None:
    assert await logged_in_as(document(netns_lab, user=WRONG_USER, host_ssh={"user": "root"})) == "root"


@pytest.mark.tier2
async def test_a_user_the_host_refuses_is_authentication_failed(netns_lab: NetnsLab, tmp_path: Path) -> None:
    error = await refused(document(netns_lab, user=WRONG_USER), tmp_path)
    assert f"user {WRONG_USER} was refused" in error.message


@pytest.mark.tier2
async def test_a_client_key_not_in_authorized_keys_is_authentication_failed(netns_lab: NetnsLab,
                                                                           tmp_path: Path) -> None:
    stranger = tmp_path / "stranger_ed25519"
    make_keypair(stranger, "not-authorized-anywhere")
    await refused(document(netns_lab, client_keys=[str(stranger)]), tmp_path)
