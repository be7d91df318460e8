"""Tier 3 lab hosts: real systemd booted by systemd-nspawn on an overlayfs copy of a cached
debootstrap image, joined to a per-host network namespace; the service is `sglang.service`.

Each container gets its own cgroup in every hierarchy the machine mounts (sysutil.CgroupLayout):
both name=systemd and cgroup2 on a hybrid host, the cgroup2 tree at /sys/fs/cgroup on a
unified-only one. nspawn itself picks the container's layout from what the host mounts.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from . import image, net
from .common import FAKE_LLM, BaseLab, LabHost, Scenario, make_keypair, write_scenario_files
from .sysutil import CLEAN_ENV, Cgroup, sh, terminate, unmount_under

SERVICE_SCRIPT = "/opt/fake_llm.py"
UNIT = """[Unit]
Description=fake sglang inference server (proofbot lab)
After=network.target

[Service]
ExecStart={command}
WorkingDirectory=/root
Restart=on-failure
RestartSec=1

[Install]
WantedBy=multi-user.target
"""
SSHD_LAB_CONF = """# proofbot lab: first value wins, so this overrides /etc/ssh/sshd_config
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
AllowTcpForwarding yes
PermitOpen any
PrintMotd no
PrintLastLog no
MaxStartups 100:30:200
MaxSessions 50
"""


@dataclass
class NspawnHost(LabHost):
    """A tier-3 host; `pid` is the systemd-nspawn launcher, `leader` the container's PID 1."""

    veth: str = ""
    pid: int = 0
    leader: int = 0
    merged: Path = field(default=Path("/nonexistent"))
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    cgroup: Cgroup | None = field(default=None, repr=False)
    net: net.NetHost | None = field(default=None, repr=False)
    SERVICE_SCRIPT: ClassVar[str] = SERVICE_SCRIPT
    LAUNCH_SCRIPT: ClassVar[str] = "/opt/launch.sh"

    def local_path(self, host_path: str) -> Path:
        """Root-side path (inside the overlay mount) of a file the container sees at host_path."""
        rel = os.path.normpath("/" + host_path).lstrip("/")
        return self.merged / rel

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 60.0,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run argv inside the container (all of PID 1's namespaces, its root, cwd /)."""
        if not self.leader:
            raise RuntimeError(f"{self.name}: container is not running")
        return sh(["nsenter", "-t", str(self.leader), "--all", "-r", "-w", "--", *argv],
                  check=check, timeout=timeout, input=input)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids += [int(x) for x in (task / "children").read_text().split()]
    except OSError:
        pass
    return kids


def find_leader(nspawn_pid: int) -> int:
    """The descendant of nspawn that is PID 1 of its own PID namespace (0 if none yet)."""
    todo = _children(nspawn_pid)
    while todo:
        pid = todo.pop()
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("NSpid:"):
                    ids = line.split()[1:]
                    if len(ids) >= 2 and ids[-1] == "1":
                        return pid
        except OSError:
            continue
        todo += _children(pid)
    return 0


def _systemd_quote(arg: str) -> str:
    arg = arg.replace("%", "%%").replace("$", "$$")
    if arg and all(c.isalnum() or c in "-_./:=,@+" for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


class NspawnLab(BaseLab):
    """Tier-3 lab. `with NspawnLab() as lab: lab.start(1)`; builds/reuses the image first."""

    tier = "tier3"

    def __init__(self, workdir: Path | None = None) -> None:
        super().__init__(workdir)
        self.image: Path | None = None
        self.image_build_s = 0.0  # 0.0 when the cached image was reused

    def ensure_image(self) -> Path:
        if self.image is None:
            self.image, self.image_build_s = image.ensure_image()
        return self.image

    def _launch(self, name: str, index: int, scenario: Scenario) -> LabHost:
        assert self.octet is not None
        img = self.ensure_image()
        hdir = self.workdir / name
        for sub in ("upper", "work", "merged"):
            (hdir / sub).mkdir(parents=True, exist_ok=True)
        nh = net.create_host_net(self.octet, index, name)
        host = NspawnHost(name=name, address=nh.address, port=22, known_hosts=self.known_hosts,
                          client_key=self.client_key, manager="systemd", scenario=scenario,
                          netns=nh.netns, host_key_pub="", host_dir=hdir, veth=nh.veth, net=nh,
                          merged=hdir / "merged")
        self.hosts[name] = host  # registered early so stop() cleans up a half-made host
        sh(["mount", "-t", "overlay", "overlay", "-o",
            f"lowerdir={img},upperdir={hdir / 'upper'},workdir={hdir / 'work'}",
            str(host.merged)])
        self._write_files(host)
        host.cgroup = Cgroup(f"proofbot-lab-{self.octet}/{name}")
        argv = ["systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--quiet",
                f"--network-namespace-path={nh.netns_path}", "-D", str(host.merged),
                "-M", f"pblab-{self.octet}-{name}", f"--hostname={name}",
                "--resolv-conf=off", "--timezone=off", "--link-journal=no",
                "--console=read-only"]
        launch = hdir / "launch.sh"
        launch.write_text("set -e\n" + host.cgroup.shell_join_lines() +
                          "exec " + " ".join(argv) + "\n")
        with open(hdir / "nspawn.out", "wb") as log:
            host.proc = subprocess.Popen(["/bin/sh", str(launch)], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, cwd="/",
                                         env=CLEAN_ENV, start_new_session=True)
        host.pid = host.proc.pid  # sh execs systemd-nspawn
        return host

    def _write_files(self, host: NspawnHost) -> None:
        lp = host.local_path
        host.host_key_pub = make_keypair(lp("/etc/ssh/ssh_host_ed25519_key"),
                                         f"root@{host.name}")
        lp("/etc/ssh/sshd_config.d").mkdir(exist_ok=True)
        lp("/etc/ssh/sshd_config.d/lab.conf").write_text(SSHD_LAB_CONF)
        ssh_dir = lp("/root/.ssh")
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(self.client_pub + "\n")
        os.chmod(ssh_dir / "authorized_keys", 0o600)
        lp("/etc/resolv.conf").unlink(missing_ok=True)
        lp("/etc/resolv.conf").write_text("")
        lp("/etc/hostname").write_text(host.name + "\n")
        shutil.copy(FAKE_LLM, lp(SERVICE_SCRIPT))
        argv = host.scenario.service_argv(SERVICE_SCRIPT)
        if host.scenario.launch_script:
            host.set_next_start(host.scenario)
            argv = ["/bin/sh", host.LAUNCH_SCRIPT]
        command = " ".join(_systemd_quote(a) for a in argv)
        lp("/etc/systemd/system/sglang.service").write_text(UNIT.format(command=command))
        wants = lp("/etc/systemd/system/multi-user.target.wants/sglang.service")
        wants.unlink(missing_ok=True)
        wants.symlink_to("/etc/systemd/system/sglang.service")
        write_scenario_files(lp, host.name, host.scenario)

    def _ready_checks(self, host: LabHost) -> list[tuple[str, Callable[[], object]]]:
        assert isinstance(host, NspawnHost) and host.proc is not None
        proc = host.proc

        def alive() -> None:
            if proc.poll() is not None:
                out = (host.host_dir / "nspawn.out").read_text(errors="replace")
                layout = host.cgroup.layout.name if host.cgroup is not None else "?"
                raise RuntimeError(f"{host.name}: systemd-nspawn exited (cgroup layout {layout}): "
                                   f"{out[-1500:]}")

        def leader() -> bool:
            alive()
            host.leader = find_leader(host.pid)
            return host.leader != 0

        def ssh_up() -> bool:
            alive()
            return net.ssh_banner(host.address, host.port).startswith(b"SSH-")

        checks: list[tuple[str, Callable[[], object]]] = [("container PID 1", leader),
                                                         ("sshd", ssh_up)]
        if host.scenario.startup_delay_s == 0:
            checks.append(("/health 200", lambda: host.health() == 200))
        checks.append(("sglang MainPID", lambda: host.service_pid() != 0))
        return checks

    def _begin_stop(self, host: LabHost) -> None:
        if isinstance(host, NspawnHost) and host.proc is not None and host.proc.poll() is None:
            host.proc.send_signal(signal.SIGTERM)

    def _destroy(self, host: LabHost) -> None:
        assert isinstance(host, NspawnHost)
        if host.proc is not None:
            # nspawn turns SIGTERM into SIGRTMIN+3 for the container: an orderly poweroff.
            try:
                terminate(host.proc, signal.SIGTERM, timeout=10.0)
            finally:
                if host.cgroup is not None:
                    host.cgroup.kill()
                terminate(host.proc, signal.SIGKILL, timeout=5.0)
        host.leader = 0
        if host.cgroup is not None:
            host.cgroup.kill()
            host.cgroup.remove()
            host.cgroup.remove_parent_if_empty()
        unmount_under(host.merged)
        if host.net is not None:
            net.delete_host_net(host.net)


Lab = NspawnLab
__all__ = ["Lab", "NspawnHost", "NspawnLab", "Scenario", "find_leader"]
