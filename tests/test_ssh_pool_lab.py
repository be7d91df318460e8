"""Tier 2: warm connections against a real OpenSSH sshd (a namespace host): two verifies as ``serve`` runs them
log in once (counted in sshd's own log), and leaving the pool logs out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.ssh import idle_connections, warm_connections
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from commands.vocabulary import Verdict
from tests.lab.common import Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab
from tests.lab.waits import until

SSHD_LOG = "/var/log/supervisor/sshd.log"


@pytest.fixture(scope="module")
def netns_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct130": Scenario()}) as lab:
        yield lab


@pytest.mark.tier2
async def test_two_warm_verifies_log_in_to_a_real_sshd_once(netns_lab: NetnsLab, tmp_path: Path) -> None:
    host = parse_inventory(yaml.safe_dump(netns_lab.inventory()), "t.yml").host("ct130")
    log = netns_lab["ct130"].local_path(SSHD_LOG)

    def said(what: str) -> int:
        return log.read_text(errors="replace").count(what)

    logins, logouts = said("Accepted publickey for root"), said("Disconnected from user root")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        async with warm_connections():
            for _ in range(2):
                result = await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
                assert result.verdict == Verdict.PASS, [f.to_json() for f in result.checks]
            assert idle_connections() == 1
            await until("sshd logged the login", lambda: said("Accepted publickey for root") == logins + 1)
            assert said("Disconnected from user root") == logouts  # kept open between the two
    finally:
        audit.close()
    await until("sshd logged the logout", lambda: said("Disconnected from user root") == logouts + 1)
    assert said("Accepted publickey for root") == logins + 1
