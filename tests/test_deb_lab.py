"""Tiers 2 and 3: ``package:deb:<name>`` over OpenSSH against the real dpkg database of a real host.

Tier 3's root is an overlay of a debootstrapped bookworm, so editing a packaged binary there
is private to the container; a tier-2 host shares the machine's /usr, so only its own /etc/ssh
(a per-host copy that holds openssh-server's conffile ``moduli``) is edited.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.common import BaseLab, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab
from tests.lab.nspawn import NspawnLab


@pytest.fixture(scope="module")
def nspawn_lab() -> Iterator[NspawnLab]:
    with running_lab(NspawnLab, {"ct160": Scenario()}) as started:
        yield started


@pytest.fixture(scope="module")
def netns_lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct161": Scenario()}) as started:
        yield started


async def deb_findings(lab: BaseLab, name: str, debs: list[str], tmp_path: Path) -> tuple[dict[str, Finding], int]:
    document = lab.inventory()
    document["hosts"][name]["packages"] = {"deb": debs}
    inventory = parse_inventory(yaml.safe_dump(document), "inv.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        result = await verify(VerifyPlan.for_host(inventory.host(name), None), origin=Origin("cli:t", "cli"),
                              audit=audit)
    finally:
        audit.close()
    found = {f.name.removeprefix("package:deb:"): f for f in result.checks if f.name.startswith("package:deb:")}
    return found, result.stats["exec_round_trips"]


@pytest.mark.tier3
async def test_systemd_host_pristine_passes_edited_binary_fails_conffile_warns(nspawn_lab: NspawnLab,
                                                                                tmp_path: Path) -> None:
    host = nspawn_lab["ct160"]
    debs = ["openssh-server", "openssh-client", "lsb-base", "no-such-package"]
    pristine, round_trips = await deb_findings(nspawn_lab, "ct160", debs, tmp_path)
    for name in ("openssh-server", "openssh-client", "lsb-base"):
        assert pristine[name].status == "pass", pristine[name].summary
    assert "openssh-client 1:9.2p1-2+deb12u" in pristine["openssh-client"].summary
    assert "md5-based" in pristine["openssh-client"].summary
    assert pristine["no-such-package"].status == "error" and "not installed" in pristine["no-such-package"].summary
    # Four packages, no more round trips: they ride in the one batch with the service state.
    assert round_trips == 1

    keygen = host.local_path("/usr/bin/ssh-keygen")
    flipped = bytearray(keygen.read_bytes())
    flipped[-1] ^= 0xFF  # one byte of the packaged binary, same size: only its md5 can tell
    keygen.write_bytes(bytes(flipped))
    with host.local_path("/etc/ssh/moduli").open("a") as moduli:
        moduli.write("# tuned by an admin\n")
    info = host.local_path("/var/lib/dpkg/info")
    (info / "lsb-base.md5sums").rename(info / "lsb-base.md5sums.aside")
    changed, _ = await deb_findings(nspawn_lab, "ct160", debs, tmp_path)

    client = changed["openssh-client"]
    assert client.status == "fail" and "/usr/bin/ssh-keygen: md5 differs" in client.summary
    version = client.details["version"]
    assert client.summary.endswith(f"To make it pristine: apt-get install --reinstall openssh-client={version}")
    server = changed["openssh-server"]
    assert server.status == "warn", server.summary
    assert server.details["conffiles_changed"] == ["/etc/ssh/moduli: md5 differs"]
    assert "Admins edit conffiles on purpose" in server.summary
    assert changed["lsb-base"].status == "error"
    assert "control file 'md5sums' does not exist" in changed["lsb-base"].summary


@pytest.mark.tier2
async def test_namespace_host_conffile_in_its_own_etc_ssh_warns(netns_lab: NetnsLab, tmp_path: Path) -> None:
    missing, _ = await deb_findings(netns_lab, "ct161", ["openssh-server"], tmp_path)
    # The lab fills the host's own /etc/ssh with keys and a config only: dpkg sees a packaged dir gone.
    assert missing["openssh-server"].status == "fail"
    assert missing["openssh-server"].details["missing"] == ["/etc/ssh/sshd_config.d is missing"]
    netns_lab["ct161"].local_path("/etc/ssh/sshd_config.d").mkdir()
    pristine, _ = await deb_findings(netns_lab, "ct161", ["openssh-server"], tmp_path)
    assert pristine["openssh-server"].status == "pass", pristine["openssh-server"].summary

    with netns_lab["ct161"].local_path("/etc/ssh/moduli").open("a") as moduli:
        moduli.write("# tuned by an admin\n")
    edited, _ = await deb_findings(netns_lab, "ct161", ["openssh-server"], tmp_path)
    assert edited["openssh-server"].status == "warn", edited["openssh-server"].summary
    assert edited["openssh-server"].details["conffiles_changed"] == ["/etc/ssh/moduli: md5 differs"]
    assert edited["openssh-server"].evidence is not None
    assert "??5?????? c /etc/ssh/moduli" in edited["openssh-server"].evidence.output
