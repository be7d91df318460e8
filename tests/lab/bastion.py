"""Tier 2 with a bastion: one namespace host whose netns is the only way to the hosts behind it.

`bastion` is a NetnsHost with a veth to the root namespace like any other, running OpenSSH with a
stock sshd_config (no MaxStartups, no MaxSessions: 10:30:100 and 10). A host started with
`start_behind()` gets its /30 of the lab's /24 on a veth into the bastion's netns and none into
the root namespace, so from here its address falls on `unreachable 10.231.0.0/16`; it has no
default route either. sshd logs at INFO to supervisord's sshd.log, where logins are counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from . import net, require_root_netns, skip_or_fail
from .common import LabHost, Scenario
from .netns import SSHD_CONFIG, NetnsHost, NetnsLab
from .sysutil import sh

BASTION = "bastion"
STOCK_SSHD_CONFIG = "".join(line + "\n" for line in SSHD_CONFIG.splitlines()
                            if not line.startswith(("MaxStartups", "MaxSessions")))
SSHD_LOG = "/var/log/supervisor/sshd.log"


def hidden_host_net(octet: int, index: int, name: str, bastion: net.NetHost) -> net.NetHost:
    """Netns pblab-R-NAME whose only link is a veth /30 into the bastion's netns (.4i+1 there, .4i+2 here)."""
    if not 0 <= index < net.MAX_HOSTS:
        raise ValueError(f"host index {index} out of range (max {net.MAX_HOSTS} per lab)")
    base = 4 * index
    nh = net.NetHost(netns=f"pblab-{octet}-{name}", veth=f"pbl{octet}b{index}",
                     address=f"10.231.{octet}.{base + 2}", gateway=f"10.231.{octet}.{base + 1}")
    sh(["ip", "route", "replace", "unreachable", str(net.LAB_NET)])
    sh(["ip", "netns", "add", nh.netns])
    try:
        inside_bastion = ["ip", "-n", bastion.netns]
        sh([*inside_bastion, "link", "add", nh.veth, "type", "veth", "peer", "name", "eth0", "netns", nh.netns])
        sh([*inside_bastion, "addr", "add", f"{nh.gateway}/30", "dev", nh.veth])
        sh([*inside_bastion, "link", "set", nh.veth, "up"])
        inside = ["ip", "-n", nh.netns]
        sh([*inside, "addr", "add", f"{nh.address}/30", "dev", "eth0"])
        sh([*inside, "link", "set", "eth0", "up"])
        sh([*inside, "link", "set", "lo", "up"])
    except Exception:
        net.delete_host_net(nh)  # deleting its netns deletes both ends of the veth
        raise
    return nh


class BastionLab(NetnsLab):
    """`lab.start_bastion()`, then `lab.start_behind(30)`; `lab.inventory()` gives those `ssh: {jump: bastion}`."""

    def __init__(self) -> None:
        super().__init__()
        self.behind: list[str] = []
        self._starting_behind = False

    @property
    def bastion(self) -> NetnsHost:
        host = self.hosts[BASTION]
        assert isinstance(host, NetnsHost)
        return host

    def start_bastion(self) -> NetnsHost:
        self.start([BASTION])
        return self.bastion

    def start_behind(self, count: int, scenario: Scenario | None = None, timeout: float = 180.0) -> list[LabHost]:
        names = [f"gpu{len(self.behind) + i:02d}" for i in range(count)]
        self._starting_behind = True
        try:
            hosts = self.start(names, scenario, timeout=timeout)
        finally:
            self._starting_behind = False
        self.behind += names
        return hosts

    def bastion_log(self) -> str:
        return self.bastion.local_path(SSHD_LOG).read_text(errors="replace")

    def accepted_logins(self) -> int:
        """Logins the bastion's sshd accepted (its INFO line `Accepted publickey for root from …`)."""
        return self.bastion_log().count("Accepted publickey for ")

    def route_behind_directly(self) -> None:
        """For a benchmark's baseline only: the bastion's netns routes (IP forwarding, no sshd) between here
        and the hosts behind it, so the same hosts can be reached directly. The root-side routes go with
        the bastion's veth when the lab stops; the lab's /16 stays unreachable otherwise."""
        bastion = self.bastion.net
        assert bastion is not None
        self.bastion.net_run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        for name in self.behind:
            hidden = self.hosts[name]
            assert isinstance(hidden, NetnsHost) and hidden.net is not None
            sh(["ip", "route", "replace", f"{hidden.net.address}/32", "via", bastion.address, "dev", bastion.veth])
            hidden.net_run(["ip", "route", "replace", f"{bastion.gateway}/32", "via", hidden.net.gateway])

    def inventory(self, approvers: Any = ("UAPPROVER",)) -> dict[str, Any]:
        document = super().inventory(approvers)
        for name in self.behind:
            document["hosts"][name]["ssh"] = {"jump": BASTION}
        return document

    def _host_net(self, name: str, index: int) -> net.NetHost:
        if not self._starting_behind:
            return super()._host_net(name, index)
        assert self.octet is not None and self.bastion.net is not None
        return hidden_host_net(self.octet, index, name, self.bastion.net)

    def _write_files(self, host: NetnsHost) -> None:
        super()._write_files(host)
        if host.name == BASTION:
            host.local_path("/etc/ssh/sshd_config").write_text(STOCK_SSHD_CONFIG)

    def _ready_checks(self, host: LabHost) -> list[tuple[str, Callable[[], object]]]:
        checks = super()._ready_checks(host)
        if host.name == BASTION:
            return checks

        def listening() -> bool:  # from here the host is unreachable by design: ask inside it
            return bool(host.net_run(["ss", "-Hltn", "sport = :22"], check=False).stdout.strip())

        return [(what, listening if what == "sshd" else probe) for what, probe in checks]


@contextmanager
def running_bastion_lab(behind: int) -> Iterator[BastionLab]:
    """The bastion and `behind` hosts behind it (skipped, or failed where labs are required, when tier 2 cannot run)."""
    reason = require_root_netns()
    if reason:
        skip_or_fail(reason)
    with BastionLab() as lab:
        lab.start_bastion()
        lab.start_behind(behind)
        yield lab
