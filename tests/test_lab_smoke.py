"""Smoke tests that prove the test lab itself: tier-2 namespace hosts, tier-3 systemd hosts,
the latency/fault proxy, teardown that leaves nothing behind, the cgroup layout detection and
the rule that a lab tier which cannot run fails (not skips) where the labs are required.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import pytest

from tests.lab import REQUIRE_ENV, UNAVAILABLE_ENV, image
from tests.lab.common import SPEC_DIR, BaseLab, LabHost, Scenario, known_hosts_line, make_keypair
from tests.lab.fixtures import running_lab
from tests.lab.net import CLAIM_DIR
from tests.lab.netns import NetnsHost, NetnsLab
from tests.lab.nspawn import NspawnHost, NspawnLab
from tests.lab.proxy import DelayProxy
from tests.lab.sysutil import CGROUP_ROOT, cgroup_layout, current_cgroup_layout, mounts_under

REPO = Path(__file__).resolve().parent.parent
DDTREE = Scenario(patched=True, extra_file=True,
                  flags=["--speculative-algorithm", "NEXTN", "--enable-ddtree"])


def ssh(host: LabHost, command: str, known_hosts: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Real OpenSSH client, strict host key checking against the lab's known_hosts."""
    return subprocess.run(host.ssh_argv(command, known_hosts=known_hosts), capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (so a PID reused by another process is not taken for ours), or
    None once the process is gone. A zombie counts as gone: killed, it waits for the machine's
    PID 1 to reap it (seconds on this machine) and holds nothing but its PID."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


@dataclass
class LabFootprint:
    """Everything a running lab created, recorded before teardown by name, PID and path."""

    octet: int
    workdir: Path
    netns: list[str] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)  # PID -> its start time
    cgroup_dirs: list[Path] = field(default_factory=list)

    @classmethod
    def of(cls, lab: BaseLab) -> LabFootprint:
        assert lab.octet is not None
        found = cls(octet=lab.octet, workdir=lab.workdir)
        for host in lab.hosts.values():
            assert isinstance(host, NetnsHost | NspawnHost)
            found.netns.append(host.netns)
            found.veths.append(host.veth)
            pids = {host.pid, *(host.cgroup.pids() if host.cgroup else ())}
            if isinstance(host, NspawnHost):
                pids.add(host.leader)
            found.processes.update({p: t for p in pids if p and (t := _start_time(p))})
            if host.cgroup is not None:
                found.cgroup_dirs += [*host.cgroup.dirs, *(d.parent for d in host.cgroup.dirs)]
        assert found.processes and found.cgroup_dirs and found.netns  # a footprint worth checking
        return found

    def leftovers(self) -> list[str]:
        left: list[str] = []
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        left += [f"netns {n}" for n in self.netns if n in netns]
        for veth in self.veths:
            if subprocess.run(["ip", "link", "show", "dev", veth], capture_output=True).returncode == 0:
                left.append(f"veth {veth}")
        left += [f"process {p}" for p, t in self.processes.items() if _start_time(p) == t]
        left += [f"mount {m}" for m in mounts_under(self.workdir)]
        left += [f"cgroup {d}" for d in self.cgroup_dirs if d.exists()]
        claim = CLAIM_DIR / f"subnet-{self.octet}"
        if claim.exists() and claim.read_text().split()[:1] == [str(os.getpid())]:
            left.append(f"claim file {claim}")
        if self.workdir.exists():
            left.append(f"workdir {self.workdir}")
        return left


@pytest.fixture(scope="module")
def lab2() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct129": Scenario(), "ct130": DDTREE}) as lab:
        yield lab
        footprint = LabFootprint.of(lab)
    assert footprint.leftovers() == [], "tier-2 teardown left these behind"


@pytest.fixture(scope="module")
def lab3() -> Iterator[NspawnLab]:
    with running_lab(NspawnLab, {"ct129": DDTREE}) as lab:
        yield lab
        footprint = LabFootprint.of(lab)
    assert footprint.leftovers() == [], "tier-3 teardown left these behind"


@pytest.mark.tier2
def test_tier2_ssh_with_lab_known_hosts_and_key(lab2: NetnsLab) -> None:
    for host in lab2.hosts.values():
        res = ssh(host, "supervisorctl status")
        assert res.returncode == 0, res.stderr
        assert "sglang" in res.stdout and "RUNNING" in res.stdout
        assert f"{host.address} ssh-ed25519 " in host.known_hosts.read_text()


@pytest.mark.tier2
def test_tier2_wrong_host_key_is_refused_by_openssh(lab2: NetnsLab, tmp_path: Path) -> None:
    other = lab2["ct130"]
    bad = tmp_path / "known_hosts"
    bad.write_text(other.known_hosts_line(address=lab2["ct129"].address) + "\n")
    res = ssh(lab2["ct129"], "touch /tmp/reached", known_hosts=bad)
    assert res.returncode == 255 and "HOST IDENTIFICATION HAS CHANGED" in res.stderr, res.stderr
    assert not lab2["ct129"].local_path("/tmp/reached").exists()


@pytest.mark.tier2
def test_tier2_health_and_probe_from_inside(lab2: NetnsLab) -> None:
    host = lab2["ct129"]
    assert host.health() == 200
    res = ssh(host, "curl -s -H 'Content-Type: application/json' -d "
                    "'{\"messages\":[{\"role\":\"user\",\"content\":\"Say OK\"}]}' "
                    "http://127.0.0.1:30000/v1/chat/completions")
    assert '"content": "OK"' in res.stdout


@pytest.mark.tier2
def test_tier2_hosts_see_different_files_at_same_path(lab2: NetnsLab) -> None:
    a, b = lab2["ct129"], lab2["ct130"]
    live, backup = f"{SPEC_DIR}/spec_info.py", "/root/sglang-ddtree-backup-20260522/spec_info.py"
    sums_a = ssh(a, f"sha256sum {live} {backup}").stdout.split()
    sums_b = ssh(b, f"sha256sum {live} {backup}").stdout.split()
    assert sums_a[0] == sums_a[2]  # clean host: live == backup
    assert sums_b[0] != sums_b[2]  # patched host: live differs from backup
    assert sums_a[0] != sums_b[0]
    assert b.local_path(live).read_text() != a.local_path(live).read_text()
    listing = ssh(b, f"find {SPEC_DIR} -type f -printf '%f %s %T@\\n'").stdout
    assert "ddtree_utils.py" in listing
    assert "ddtree_utils.py" not in ssh(a, f"ls {SPEC_DIR}").stdout


@pytest.mark.tier2
def test_tier2_cmdline_has_flags_and_files_predate_start(lab2: NetnsLab) -> None:
    script = ("pid=$(supervisorctl pid sglang); tr '\\0' ' ' < /proc/$pid/cmdline; echo; "
              "cut -d' ' -f22 /proc/$pid/stat; cut -d' ' -f1 /proc/uptime; getconf CLK_TCK; "
              f"stat -c %Y {SPEC_DIR}/spec_info.py; date +%s")
    for name, ddtree in (("ct129", False), ("ct130", True)):
        out = ssh(lab2[name], script).stdout.splitlines()
        assert "--speculative-algorithm NEXTN" in out[0]
        assert ("--enable-ddtree" in out[0]) is ddtree
        started_ago = float(out[2]) - int(out[1]) / int(out[3])
        assert int(out[5]) - int(out[4]) >= int(started_ago)  # mtime <= process start


@pytest.mark.tier2
def test_tier2_supervisorctl_restart_changes_pid(lab2: NetnsLab) -> None:
    host = lab2["ct129"]
    before = int(ssh(host, "supervisorctl pid sglang").stdout)
    res = ssh(host, "supervisorctl restart sglang")
    assert "started" in res.stdout, res
    after = int(ssh(host, "supervisorctl pid sglang").stdout)
    assert before and after and before != after
    assert host.service_pid() == after


@pytest.mark.tier2
async def test_tier2_port_forward_and_proxy(lab2: NetnsLab, tmp_path: Path) -> None:
    host = lab2["ct129"]
    async with DelayProxy(host.address, host.port, delay_s=0.025) as proxy:
        kh = tmp_path / "known_hosts"
        kh.write_text(host.known_hosts_line("127.0.0.1", proxy.port) + "\n")
        t0 = time.monotonic()
        async with asyncssh.connect("127.0.0.1", proxy.port, username="root",
                                    known_hosts=str(kh), client_keys=[str(host.client_key)],
                                    config=None) as conn:
            assert time.monotonic() - t0 > 0.1  # several delayed round trips: the proxy delays
            reader, writer = await conn.open_connection("127.0.0.1", 30000)
            writer.write(b"GET /health HTTP/1.0\r\nHost: x\r\n\r\n")
            reply = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            assert reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n")[0]
            res = await conn.run("echo hi", check=True)
            assert res.stdout == "hi\n"
            proxy.reset()
            with pytest.raises((asyncssh.Error, OSError)):
                await asyncio.wait_for(conn.run("echo again", check=True), 10)


@pytest.mark.tier2
async def test_tier2_proxy_blackhole_stalls_then_restores(lab2: NetnsLab) -> None:
    host = lab2["ct129"]
    async with DelayProxy(host.address, host.port) as proxy:
        proxy.blackhole()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.read(64), 0.5)
        proxy.restore()
        banner = await asyncio.wait_for(reader.read(64), 5)
        assert banner.startswith(b"SSH-2.0-")
        writer.close()
        await writer.wait_closed()


@pytest.mark.tier2
def test_tier2_inventory_shape(lab2: NetnsLab) -> None:
    inv = lab2.inventory()
    assert inv["ssh"]["known_hosts"] == str(lab2.known_hosts)
    entry = inv["hosts"]["ct130"]
    assert entry["service"]["manager"] == "supervisord" and entry["service"]["unit"] == "sglang"
    assert entry["backups"]["pre-ddtree"]["files"]["spec_info.py"] == f"{SPEC_DIR}/spec_info.py"


@pytest.mark.tier3
def test_tier3_real_systemd_mainpid_and_restart(lab3: NspawnLab) -> None:
    host = next(iter(lab3.hosts.values()))
    assert ssh(host, "cat /proc/1/comm").stdout.strip() == "systemd"
    show = "systemctl show sglang -p MainPID --value"
    before = int(ssh(host, show).stdout)
    assert before != 0
    res = ssh(host, "systemctl restart sglang")
    assert res.returncode == 0, res.stderr
    after = int(ssh(host, show).stdout)
    assert after not in (0, before)
    cmdline = ssh(host, f"tr '\\0' ' ' < /proc/{after}/cmdline").stdout
    assert "--speculative-algorithm NEXTN" in cmdline and "--enable-ddtree" in cmdline
    assert host.health() == 200
    assert image.image_ready()


@pytest.mark.tier3
def test_tier3_wrong_host_key_is_refused_by_openssh(lab3: NspawnLab, tmp_path: Path) -> None:
    host = next(iter(lab3.hosts.values()))
    stranger = make_keypair(tmp_path / "stranger_ed25519", "not-the-lab-host")
    bad = tmp_path / "known_hosts"
    bad.write_text(known_hosts_line(host.address, host.port, stranger) + "\n")
    res = ssh(host, "true", known_hosts=bad)
    assert res.returncode == 255 and "HOST IDENTIFICATION HAS CHANGED" in res.stderr, res.stderr
    assert ssh(host, "true").returncode == 0  # the recorded key is accepted


@pytest.mark.tier3
def test_tier3_files_and_forwarding_config(lab3: NspawnLab) -> None:
    host = next(iter(lab3.hosts.values()))
    out = ssh(host, f"ls {SPEC_DIR}; sshd -T | grep -i -e allowtcpforwarding -e usedns").stdout
    assert "ddtree_utils.py" in out and "allowtcpforwarding yes" in out and "usedns no" in out
    assert host.local_path("/etc/resolv.conf").read_text() == ""


# -- cgroup layouts, as /proc/self/mountinfo shows them ---------------------------------------

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
UNIFIED = (  # Debian 12 default
    "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n")
LEGACY = (
    "25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:23 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup "
    "rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd\n"
    "27 25 0:24 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,memory\n")
ELSEWHERE = "50 23 0:40 / /mnt/cg2 rw,relatime - cgroup2 cgroup2 rw\n"  # not under /sys/fs/cgroup


@pytest.mark.parametrize(("mountinfo", "name", "dirs"), [
    (HYBRID, "hybrid", ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"]),
    (UNIFIED, "unified", ["/sys/fs/cgroup"]),
    (LEGACY, "legacy", ["/sys/fs/cgroup/systemd"]),
    (HYBRID + "60 23 0:41 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "unified", ["/sys/fs/cgroup"]),
    (ELSEWHERE, "none", []),
], ids=["hybrid", "unified-only", "legacy", "unified-mounted-over-hybrid", "none"])
def test_cgroup_layout_is_read_from_mountinfo(mountinfo: str, name: str, dirs: list[str]) -> None:
    layout = cgroup_layout(mountinfo)
    assert (layout.name, [str(d) for d in layout.dirs]) == (name, dirs)


def test_cgroup_layout_of_this_machine_matches_the_filesystem_type() -> None:
    fstype = subprocess.run(["stat", "-fc", "%T", str(CGROUP_ROOT)], capture_output=True,
                            text=True, check=True).stdout.strip()
    layout = current_cgroup_layout()
    assert (layout.name == "unified") is (fstype == "cgroup2fs"), (layout, fstype)
    for d in layout.dirs:
        assert d.is_dir()


# -- labs required: a tier that cannot run fails the run ------------------------------------

NEEDS_TIERS = '''
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab
from tests.lab.nspawn import NspawnLab


def test_needs_tier2():
    with running_lab(NetnsLab, {}):
        pass


def test_needs_tier3():
    with running_lab(NspawnLab, {}):
        pass
'''


def run_inner_pytest(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_needs_tiers.py"
    test_file.write_text(NEEDS_TIERS)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", REQUIRE_ENV, UNAVAILABLE_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-ra", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(REPO), str(test_file)],
        cwd=REPO, env={**clean, UNAVAILABLE_ENV: "tier2,tier3", **env}, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("env", [{REQUIRE_ENV: "1"}, {"CI": "true"}], ids=["PROOFBOT_REQUIRE_LABS=1", "CI=true"])
def test_required_lab_that_cannot_run_fails_naming_why(tmp_path: Path, env: dict[str, str]) -> None:
    run = run_inner_pytest(tmp_path, env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 failed" in run.stdout and "skipped" not in run.stdout, run.stdout
    for tier in ("tier2", "tier3"):
        assert f"{tier} lab made unavailable by {UNAVAILABLE_ENV}" in run.stdout, run.stdout


def test_lab_that_cannot_run_skips_with_its_reason_when_not_required(tmp_path: Path) -> None:
    run = run_inner_pytest(tmp_path, {REQUIRE_ENV: "0", "CI": "true"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 skipped" in run.stdout, run.stdout
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 2 and all(f"lab made unavailable by {UNAVAILABLE_ENV}" in s for s in skipped), skipped
