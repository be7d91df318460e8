"""Tier 2: health and probe over a real OpenSSH direct-tcpip channel; a slow-drip endpoint on a namespace host."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from commands.inventory import parse_inventory
from commands.operation import OperationResult, Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.common import Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab
from tests.test_host_http import listening_sockets

DRIP_SERVER = Path(__file__).with_name("drip_server.py")
DRIP_PORT = 18080


@pytest.fixture(scope="module")
def netns_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct170": Scenario()}) as lab:
        yield lab


async def verify_with(lab: NetnsLab, tmp_path: Path, **service: object) -> OperationResult:
    document = lab.inventory()
    document["hosts"]["ct170"]["service"].update(service)
    host = parse_inventory(yaml.safe_dump(document), "i.yml").host("ct170")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        return await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
    finally:
        audit.close()


@pytest.mark.tier2
async def test_health_and_probe_pass_over_sshd_channels_with_nothing_listening(netns_lab: NetnsLab,
                                                                               tmp_path: Path) -> None:
    before = listening_sockets()
    seen: dict[str, str] = {}
    task = asyncio.create_task(verify_with(netns_lab, tmp_path))
    while not task.done():
        seen.update(listening_sockets())
        await asyncio.sleep(0.005)
    statuses = {f.name: f.status for f in task.result().checks}
    assert statuses["health"] == "pass" and statuses["probe"] == "pass", statuses
    assert set(seen) - set(before) == set(), f"listening sockets opened meanwhile: {seen}"


@pytest.mark.tier2
async def test_a_slow_drip_on_the_host_fails_health_by_its_deadline(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host = netns_lab["ct170"]
    # Inside the host's own /srv: the repo may live under /tmp, which each lab host has its own of.
    shutil.copy(DRIP_SERVER, host.local_path("/srv/drip_server.py"))
    server = await asyncio.create_subprocess_exec(
        "nsenter", "-t", str(host.pid), "-n", "-m", "-w", "--", "/usr/bin/python3", "/srv/drip_server.py", "drip-body",
        str(DRIP_PORT), stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    try:
        assert server.stdout is not None
        assert (await server.stdout.readline()).strip() == b"listening"
        result = await verify_with(netns_lab, tmp_path, health_url=f"http://127.0.0.1:{DRIP_PORT}/health")
    finally:
        server.terminate()
        await server.wait()
    found = {f.name: f for f in result.checks}
    assert found["health"].status == "fail"
    assert found["health"].summary.startswith("HTTP 200 came, then the endpoint sent ")
    assert found["health"].summary.endswith("bytes in 5 s and never finished: slow drip")
    assert found["main-pid"].status == "pass" and found["probe"].status == "pass"
