"""Per-run network plumbing for lab hosts: subnet claim, netns + veth, and readiness probes.

Only 10.231.0.0/16 and loopback are used; nothing outside what this run created is touched.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .sysutil import pid_alive, sh

LAB_NET = ipaddress.ip_network("10.231.0.0/16")
CLAIM_DIR = Path("/run/proofbot-lab")  # one file per claimed /24: subnet-<octet>, holds a PID
MAX_HOSTS = 63  # one /30 per host inside the run's /24


@dataclass
class NetHost:
    """The network side of one lab host."""

    netns: str  # name under /run/netns
    veth: str  # root-side interface name (the host side is eth0 inside the netns)
    address: str  # host side, reachable from the root namespace
    gateway: str  # root side address of the /30 (no default route is ever added)

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"


def _octets_in_use() -> set[int]:
    out = sh(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    out += sh(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
    used: set[int] = set()
    for word in out.split():
        with contextlib.suppress(ValueError):
            addr = ipaddress.ip_interface(word).ip
            if addr in LAB_NET:
                used.add(int(str(addr).split(".")[2]))
    return used


def claim_subnet() -> int:
    """Claim a free third octet R (this run then uses 10.231.R.0/24) and return it."""
    CLAIM_DIR.mkdir(parents=True, exist_ok=True)
    used = _octets_in_use()
    start = os.getpid() % 254
    for k in range(254):
        octet = (start + k) % 254 + 1
        if octet in used:
            continue
        claim = CLAIM_DIR / f"subnet-{octet}"
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(OSError, ValueError):
                if not pid_alive(int(claim.read_text().split()[0])):
                    claim.unlink()  # stale claim of a dead run; retry this octet later
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        return octet
    raise RuntimeError("no free /24 left in 10.231.0.0/16")


def release_subnet(octet: int) -> None:
    claim = CLAIM_DIR / f"subnet-{octet}"
    with contextlib.suppress(OSError, ValueError):
        if int(claim.read_text().split()[0]) == os.getpid():
            claim.unlink()


def create_host_net(octet: int, index: int, name: str) -> NetHost:
    """Create netns pblab-R-NAME with a veth /30: root side .4i+1, host side .4i+2."""
    if not 0 <= index < MAX_HOSTS:
        raise ValueError(f"host index {index} out of range (max {MAX_HOSTS} per lab)")
    base = 4 * index
    nh = NetHost(netns=f"pblab-{octet}-{name}", veth=f"pbl{octet}h{index}",
                 address=f"10.231.{octet}.{base + 2}", gateway=f"10.231.{octet}.{base + 1}")
    # Safety net first: if a veth route vanishes, packets to the lab range go nowhere.
    sh(["ip", "route", "replace", "unreachable", str(LAB_NET)])
    sh(["ip", "netns", "add", nh.netns])
    try:
        sh(["ip", "link", "add", nh.veth, "type", "veth", "peer", "name", "eth0",
            "netns", nh.netns])
        sh(["ip", "addr", "add", f"{nh.gateway}/30", "dev", nh.veth])
        sh(["ip", "link", "set", nh.veth, "up"])
        nsx = ["ip", "-n", nh.netns]
        sh([*nsx, "addr", "add", f"{nh.address}/30", "dev", "eth0"])
        sh([*nsx, "link", "set", "eth0", "up"])
        sh([*nsx, "link", "set", "lo", "up"])
    except Exception:
        delete_host_net(nh)
        raise
    return nh


def delete_host_net(nh: NetHost) -> None:
    """Delete exactly this host's veth and netns (by recorded name)."""
    links = sh(["ip", "-o", "link", "show", "dev", nh.veth], check=False)
    if links.returncode == 0:
        sh(["ip", "link", "del", nh.veth], check=False)
    if Path(nh.netns_path).exists():
        sh(["ip", "netns", "del", nh.netns], check=False)


def ssh_banner(address: str, port: int, timeout: float = 1.0) -> bytes:
    """First line the SSH server sends, or b"" if it does not answer."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as s:
            return s.recv(64)
    except OSError:
        return b""


def http_status_in_netns(netns: str, url: str, timeout: float = 2.0) -> int:
    """HTTP status of GET url as seen from inside netns (0 if no answer)."""
    res = sh(["nsenter", f"--net=/run/netns/{netns}", "curl", "-s", "-o", "/dev/null",
              "-w", "%{http_code}", "--max-time", str(timeout), url],
             check=False, timeout=timeout + 5)
    try:
        return int(res.stdout.strip() or 0)
    except ValueError:
        return 0


def wait_until(what: str, probe: Callable[[], object], deadline: float,
               interval: float = 0.05) -> None:
    """Poll probe() until it returns something truthy or the deadline passes."""
    while True:
        if probe():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval)
