"""Smoke tests that prove the test lab itself: tier-2 namespace hosts, tier-3 systemd hosts
and the latency/fault proxy. Hosts are started once per module.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

try:  # tests/ is not a package: run as `python -m pytest` or plain `pytest`
    from tests.lab import image, require_nspawn, require_root_netns
    from tests.lab.common import SPEC_DIR, LabHost, Scenario
    from tests.lab.netns import NetnsLab
    from tests.lab.nspawn import NspawnLab
    from tests.lab.proxy import DelayProxy
except ImportError:
    from lab import image, require_nspawn, require_root_netns  # type: ignore[no-redef,import-not-found]
    from lab.common import SPEC_DIR, LabHost, Scenario  # type: ignore[no-redef,import-not-found]
    from lab.netns import NetnsLab  # type: ignore[no-redef,import-not-found]
    from lab.nspawn import NspawnLab  # type: ignore[no-redef,import-not-found]
    from lab.proxy import DelayProxy  # type: ignore[no-redef,import-not-found]

DDTREE = Scenario(patched=True, extra_file=True,
                  flags=["--speculative-algorithm", "NEXTN", "--enable-ddtree"])


def ssh(host: LabHost, command: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """Real OpenSSH client, strict host key checking against the lab's known_hosts."""
    return subprocess.run(host.ssh_argv(command, **kw), capture_output=True,  # type: ignore[arg-type]
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def assert_gone(prefix: str, workdir: Path) -> None:
    """Nothing this lab created is left (other runs' hosts may exist in parallel)."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in netns, netns
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f": {prefix.replace('pblab-', 'pbl').rstrip('-')}h" not in links, links
    with open("/proc/self/mountinfo") as f:
        assert str(workdir) not in f.read()
    assert not workdir.exists()


@pytest.fixture(scope="module")
def lab2() -> Iterator[NetnsLab]:
    reason = require_root_netns()
    if reason:
        pytest.skip(reason)
    lab = NetnsLab()
    try:
        lab.start(["ct129", "ct130"], per_host={"ct130": DDTREE})
        yield lab
    finally:
        prefix = f"pblab-{lab.octet}-"
        lab.stop()
        assert_gone(prefix, lab.workdir)


@pytest.fixture(scope="module")
def lab3() -> Iterator[NspawnLab]:
    reason = require_nspawn()
    if reason:
        pytest.skip(reason)
    lab = NspawnLab()
    try:
        lab.start(1, DDTREE)
        yield lab
    finally:
        prefix = f"pblab-{lab.octet}-"
        lab.stop()
        assert_gone(prefix, lab.workdir)


@pytest.mark.tier2
def test_tier2_ssh_with_lab_known_hosts_and_key(lab2: NetnsLab) -> None:
    for host in lab2.hosts.values():
        res = ssh(host, "supervisorctl status")
        assert res.returncode == 0, res.stderr
        assert "sglang" in res.stdout and "RUNNING" in res.stdout
        assert f"{host.address} ssh-ed25519 " in host.known_hosts.read_text()


@pytest.mark.tier2
def test_tier2_wrong_host_key_is_refused(lab2: NetnsLab, tmp_path: Path) -> None:
    other = lab2["ct130"]
    bad = tmp_path / "known_hosts"
    bad.write_text(other.known_hosts_line(address=lab2["ct129"].address) + "\n")
    res = ssh(lab2["ct129"], "true", known_hosts=bad)
    assert res.returncode == 255 and "HOST IDENTIFICATION HAS CHANGED" in res.stderr


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
            assert time.monotonic() - t0 > 0.1  # several delayed round trips
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
def test_tier3_files_and_forwarding_config(lab3: NspawnLab) -> None:
    host = next(iter(lab3.hosts.values()))
    out = ssh(host, f"ls {SPEC_DIR}; sshd -T | grep -i -e allowtcpforwarding -e usedns").stdout
    assert "ddtree_utils.py" in out and "allowtcpforwarding yes" in out and "usedns no" in out
    assert host.local_path("/etc/resolv.conf").read_text() == ""
