"""Tier 2: a fleet reachable only through a bastion with a stock sshd_config (MaxStartups 10:30:100,
MaxSessions 10), the real OpenSSH deciding: 30 hosts behind it verified in one run over one bastion
login; a bastion key that changed refused naming the bastion; OpenSSH's default limits respected.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.errors import HostUnreachable
from commands.inventory import Inventory, parse_inventory
from commands.operation import OperationResult, Origin
from commands.ssh import connect
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.conftest import run_cli, write_inventory
from tests.lab import net
from tests.lab.bastion import BASTION, SSHD_LOG, BastionLab, running_bastion_lab
from tests.lab.common import make_keypair
from tests.lab.waits import until

pytestmark = pytest.mark.tier2

BEHIND = 30
DROPPED = "past MaxStartups"  # what OpenSSH logs for each connection MaxStartups drops


@pytest.fixture(scope="module")
def lab() -> Iterator[BastionLab]:
    with running_bastion_lab(BEHIND) as bastion_lab:
        yield bastion_lab


def parsed(document: dict[str, Any]) -> Inventory:
    return parse_inventory(yaml.safe_dump(document), "bastion-lab.yml")


async def verify_each(inventory: Inventory, names: list[str], tmp_path: Path) -> list[OperationResult]:
    audit = AuditStore.open(tmp_path / "audit.db")
    try:
        return await asyncio.gather(*(verify(VerifyPlan.for_host(inventory.host(name), "pre-ddtree"),
                                             origin=Origin.local_user(), audit=audit) for name in names))
    finally:
        audit.close()


async def test_thirty_hosts_behind_a_stock_bastion_all_pass_over_one_bastion_login(
        lab: BastionLab, tmp_path: Path) -> None:
    hidden = lab.hosts[lab.behind[0]]
    assert net.ssh_banner(hidden.address, 22) == b""  # no route from here: only through the bastion
    await all_pass_over_one_bastion_login(lab, parsed(lab.inventory()), tmp_path)


async def all_pass_over_one_bastion_login(lab: BastionLab, inventory: Inventory, tmp_path: Path) -> None:
    """Every host behind the bastion verified at once: all pass with every check, ONE bastion login."""
    before = lab.accepted_logins()
    results = await verify_each(inventory, lab.behind, tmp_path)
    assert [r.verdict for r in results] == ["pass"] * len(lab.behind), [
        (r.host, [f.summary for f in r.checks if f.status != "pass"]) for r in results if r.verdict != "pass"]
    assert {len(r.checks) for r in results} == {9}  # every check of a directly reached host
    assert lab.accepted_logins() - before == 1
    assert DROPPED not in lab.bastion_log()
    for name in lab.behind:  # each host was logged into, from the bastion's side of its link
        host = lab.hosts[name]
        assert host.net is not None
        assert f"Accepted publickey for root from {host.net.gateway} " in host.local_path(SSHD_LOG).read_text()


async def test_a_bastion_whose_key_changed_is_refused_naming_the_bastion(lab: BastionLab, tmp_path: Path) -> None:
    other = make_keypair(tmp_path / "other_key", "not-the-bastion")
    known = tmp_path / "known_hosts"
    known.write_text("".join(line + "\n" if not line.startswith(lab.bastion.address + " ") else
                             f"{lab.bastion.address} {other}\n" for line in lab.known_hosts.read_text().splitlines()))
    document = lab.inventory()
    document["ssh"]["known_hosts"] = str(known)
    before = lab.accepted_logins()
    results = await verify_each(parsed(document), lab.behind[:3], tmp_path)
    assert [r.verdict for r in results] == ["error"] * 3
    for result in results:
        said = result.checks[0].summary
        assert said.startswith(f"could not check: could not reach the bastion {BASTION} ({lab.bastion.address}:22): "
                               f"host key not verified against {known}"), said
    assert lab.accepted_logins() == before


async def test_a_bastion_trusted_only_through_a_ca_but_presenting_no_certificate_is_said_so(
        lab: BastionLab, tmp_path: Path) -> None:
    """The bastion presents its plain key where known_hosts trusts it only through @cert-authority: proofbot
    says so (and which key it presented), not "check the network"."""
    ca = make_keypair(tmp_path / "host_ca", "a host CA the bastion's key is not signed by")
    known = tmp_path / "known_hosts"
    known.write_text("".join(line + "\n" for line in lab.known_hosts.read_text().splitlines()
                             if not line.startswith(lab.bastion.address + " ")) + f"@cert-authority * {ca}\n")
    document = lab.inventory()
    document["ssh"]["known_hosts"] = str(known)
    before = lab.accepted_logins()
    (result,) = await verify_each(parsed(document), lab.behind[:1], tmp_path)
    said = result.checks[0].summary
    assert said.startswith(f"could not check: could not reach the bastion {BASTION} ({lab.bastion.address}:22): "
                           f"host key not verified against {known}: known_hosts trusts {lab.bastion.address} only "
                           f"through a host CA ({known}:"), said
    assert "presented a plain ED25519 key SHA256:" in said and "no certificate" in said, said
    assert lab.accepted_logins() == before


def one_sshd_many_names(lab: BastionLab, count: int, **ssh: Any) -> Inventory:
    """`count` inventory hosts that are all the bastion, reached directly: one sshd, `count` connections."""
    document = lab.inventory()
    entry = document["hosts"][BASTION]
    document["hosts"] = {f"b{i:02d}": copy.deepcopy(entry) for i in range(count)}
    document["ssh"].update(ssh)
    return parsed(document)


async def test_thirty_connections_at_once_to_one_stock_sshd_are_never_dropped(lab: BastionLab) -> None:
    inventory = one_sshd_many_names(lab, 30)
    before = lab.accepted_logins()
    log_before = len(lab.bastion_log())

    async def login(name: str) -> int:
        async with connect(inventory.host(name)) as conn:
            return (await conn.run(["true"])).exit_status

    assert await asyncio.gather(*(login(name) for name in inventory.hosts)) == [0] * 30
    assert lab.accepted_logins() - before == 30
    assert DROPPED not in lab.bastion_log()[log_before:]


async def test_a_stock_sshd_refuses_sessions_past_ten_and_proofbot_retries_them(lab: BastionLab) -> None:
    host = one_sshd_many_names(lab, 1, max_sessions=20).host("b00")  # told more than sshd allows
    async with connect(host) as conn:
        results = await asyncio.gather(*(conn.run(["sh", "-c", "sleep 0.3; echo done"]) for _ in range(20)))
        refused = conn.refused_sessions
    assert [r.text.strip() for r in results] == ["done"] * 20
    assert refused > 0  # sshd said no past MaxSessions 10, and each was tried again, not reported


async def test_forwarded_channels_do_not_count_against_max_sessions(lab: BastionLab) -> None:
    host = one_sshd_many_names(lab, 1).host("b00")
    marks = lab.bastion.local_path("/tmp/sessions")
    marks.mkdir(exist_ok=True)
    async with connect(host) as conn:
        held = [asyncio.create_task(conn.run(["sh", "-c", f"touch /tmp/sessions/{i}; sleep 2"])) for i in range(10)]
        await until("ten sessions open on the host", lambda: len(list(marks.iterdir())) == 10)
        banners = []
        for _ in range(5):  # while MaxSessions' ten are in use: direct-tcpip is not a session
            channel = await conn.open_tcp("127.0.0.1", 22)
            banners.append(await channel.read(64))
            channel.close()
        results = await asyncio.gather(*held)
        refused = conn.refused_sessions
    assert all(banner.startswith(b"SSH-2.0-") for banner in banners), banners
    assert [r.exit_status for r in results] == [0] * 10 and refused == 0


async def test_a_session_refused_past_the_deadline_is_an_error_saying_why(lab: BastionLab) -> None:
    host = one_sshd_many_names(lab, 1, max_sessions=20, command_timeout_s=1).host("b00")
    marks = lab.bastion.local_path("/tmp/held")
    marks.mkdir(exist_ok=True)
    async with connect(host) as conn:
        held = [asyncio.create_task(conn.run(["sh", "-c", f"touch /tmp/held/{i}; sleep 3"], timeout_s=10))
                for i in range(10)]
        await until("ten sessions open on the host", lambda: len(list(marks.iterdir())) == 10)
        with pytest.raises(HostUnreachable) as refused:
            await conn.run(["true"])  # the eleventh: sshd says no until its 1 s deadline
        assert [r.exit_status for r in await asyncio.gather(*held)] == [0] * 10
    said = str(refused.value)
    assert said.startswith(f"b00 ({lab.bastion.address}:22): sshd refused a session channel "), said
    assert " times in 1 s: open failed (its MaxSessions may be lower than ssh.max_sessions" in said, said


async def test_the_cli_pings_and_verifies_hosts_it_can_reach_only_through_the_bastion(
        lab: BastionLab, tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", lab.inventory())
    before = lab.accepted_logins()
    ping = await run_cli("ping", *lab.behind[:5], "--inventory", str(inventory))
    assert ping.code == 0, ping.stdout + ping.stderr
    assert [line.split()[:3] for line in ping.stdout.splitlines()] == [["✓", "pass", name] for name in lab.behind[:5]]
    run = await run_cli("verify", lab.behind[-1], "--json", "--inventory", str(inventory),
                        "--db", str(tmp_path / "a.db"))
    assert run.code == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["verdict"] == "pass"
    assert "Warning" not in run.stderr and "unclosed" not in run.stderr, run.stderr
    assert lab.accepted_logins() - before == 2  # one bastion login per CLI run
