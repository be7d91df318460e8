"""Tier 2 lab hosts: netns + private mount view + supervisord managing OpenSSH and `sglang`.

supervisorctl inside a host works with no arguments: the host's /etc/supervisor is its own.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import xmlrpc.client
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from . import net
from .common import FAKE_LLM, BaseLab, LabHost, Scenario, make_keypair, write_scenario_files
from .sysutil import CLEAN_ENV, Cgroup, sh, terminate

# Host path -> directory (relative to host_dir) bind-mounted over it inside the host.
BINDS: dict[str, str] = {
    "/root": "root", "/etc/supervisor": "etc-supervisor", "/etc/ssh": "etc-ssh",
    "/srv": "srv", "/tmp": "tmp", "/run": "run", "/var/log/supervisor": "log",
}
SERVICE_SCRIPT = "/srv/app/fake_llm.py"
SUPERVISOR_SOCK = "/run/supervisor.sock"

SUPERVISORD_CONF = f"""; supervisord of lab host {{name}} (its own view of /etc/supervisor)
[unix_http_server]
file={SUPERVISOR_SOCK}
chmod=0700

[supervisord]
nodaemon=true
user=root
logfile=/var/log/supervisor/supervisord.log
pidfile=/run/supervisord.pid
childlogdir=/var/log/supervisor

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{SUPERVISOR_SOCK}

[include]
files = /etc/supervisor/conf.d/*.conf
"""
SSHD_PROGRAM = """[program:sshd]
command=/usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
priority=10
autorestart=true
startsecs=0
redirect_stderr=true
stdout_logfile=/var/log/supervisor/sshd.log
"""
SGLANG_PROGRAM = """[program:sglang]
command={command}
directory=/root
priority=20
autorestart=true
startsecs=1
stopwaitsecs=5
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile=/var/log/supervisor/sglang.log
"""
SSHD_CONFIG = """# sshd of lab host {name}
Port 22
ListenAddress 0.0.0.0
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile none
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile /root/.ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
AllowTcpForwarding yes
PermitOpen any
X11Forwarding no
PrintMotd no
PrintLastLog no
ClientAliveInterval 0
MaxStartups 100:30:200
MaxSessions 50
Subsystem sftp /usr/lib/openssh/sftp-server
"""


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=2.0)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class _UnixTransport(xmlrpc.client.Transport):
    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path

    def make_connection(self, host: object) -> http.client.HTTPConnection:
        conn = _UnixHTTPConnection(self._path)
        self._connection = ("localhost", conn)  # so Transport.close() closes it
        return conn


@dataclass
class NetnsHost(LabHost):
    """A tier-2 host; `pid` is its supervisord (which is also the mount-namespace anchor)."""

    veth: str = ""
    pid: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    cgroup: Cgroup | None = field(default=None, repr=False)
    net: net.NetHost | None = field(default=None, repr=False)
    SERVICE_SCRIPT: ClassVar[str] = SERVICE_SCRIPT
    LAUNCH_SCRIPT: ClassVar[str] = "/srv/app/launch.sh"

    def local_path(self, host_path: str) -> Path:
        """Root-side path of host_path. Paths outside BINDS are shared with the machine."""
        p = os.path.normpath(host_path)
        for prefix in sorted(BINDS, key=len, reverse=True):
            if p == prefix or p.startswith(prefix + "/"):
                return self.host_dir / BINDS[prefix] / os.path.relpath(p, prefix)
        return Path(p)

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 60.0,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run argv inside the host (its netns and mount namespace), cwd /."""
        return sh(["nsenter", "-t", str(self.pid), "-n", "-m", "-w", "--", *argv],
                  check=check, timeout=timeout, input=input)

    def supervisor_state(self, program: str = "sglang") -> str:
        """supervisord's state name for program (via the host's socket), "" if unknown."""
        sock = str(self.local_path(SUPERVISOR_SOCK))
        try:
            with xmlrpc.client.ServerProxy("http://localhost",
                                           transport=_UnixTransport(sock)) as proxy:
                info = proxy.supervisor.getProcessInfo(program)
            return str(info["statename"]) if isinstance(info, dict) else ""
        except (OSError, xmlrpc.client.Error, http.client.HTTPException):
            return ""


class NetnsLab(BaseLab):
    """Tier-2 lab. `with NetnsLab() as lab: lab.start(2, Scenario(patched=True))`."""

    tier = "tier2"

    def _launch(self, name: str, index: int, scenario: Scenario) -> LabHost:
        assert self.octet is not None
        hdir = self.workdir / name
        for sub in BINDS.values():
            (hdir / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(hdir / "root", 0o700)
        os.chmod(hdir / "tmp", 0o1777)
        nh = self._host_net(name, index)
        host = NetnsHost(name=name, address=nh.address, port=22, known_hosts=self.known_hosts,
                         client_key=self.client_key, manager="supervisord", scenario=scenario,
                         netns=nh.netns, host_key_pub="", host_dir=hdir, veth=nh.veth, net=nh)
        self.hosts[name] = host  # registered early so stop() cleans up a half-made host
        self._write_files(host)
        host.cgroup = Cgroup(f"proofbot-lab-{self.octet}/{name}")
        launch = hdir / "launch.sh"
        inner = hdir / "inner.sh"
        mounts = "".join(f"mount --bind {hdir / sub} {target}\n" for target, sub in BINDS.items())
        inner.write_text("set -e\n" + mounts +
                         "exec /usr/bin/supervisord -n -c /etc/supervisor/supervisord.conf\n")
        launch.write_text("set -e\n" + host.cgroup.shell_join_lines() +
                          f"exec ip netns exec {nh.netns} /bin/sh {inner}\n")
        with open(hdir / "supervisord.out", "wb") as log:
            host.proc = subprocess.Popen(["/bin/sh", str(launch)], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, cwd="/",
                                         env=CLEAN_ENV, start_new_session=True)
        host.pid = host.proc.pid  # sh execs ip, which execs sh, which execs supervisord
        return host

    def _host_net(self, name: str, index: int) -> net.NetHost:
        """The host's network: a veth /30 to the root namespace (a subclass may route it elsewhere)."""
        assert self.octet is not None
        return net.create_host_net(self.octet, index, name)

    def _write_files(self, host: NetnsHost) -> None:
        lp = host.local_path
        host.host_key_pub = make_keypair(lp("/etc/ssh/ssh_host_ed25519_key"),
                                         f"root@{host.name}")
        for extra in ("moduli", "ssh_config"):
            if Path("/etc/ssh", extra).exists():
                shutil.copy(Path("/etc/ssh", extra), lp(f"/etc/ssh/{extra}"))
        lp("/etc/ssh/sshd_config").write_text(SSHD_CONFIG.format(name=host.name))
        ssh_dir = lp("/root/.ssh")
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(self.client_pub + "\n")
        os.chmod(ssh_dir / "authorized_keys", 0o600)
        lp("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        conf_d = lp("/etc/supervisor/conf.d")
        conf_d.mkdir(exist_ok=True)
        lp("/etc/supervisor/supervisord.conf").write_text(SUPERVISORD_CONF.format(name=host.name))
        (conf_d / "sshd.conf").write_text(SSHD_PROGRAM)
        argv = host.scenario.service_argv(SERVICE_SCRIPT)
        if host.scenario.launch_script:
            argv = ["/bin/sh", host.LAUNCH_SCRIPT]
        command = " ".join(_supervisor_quote(a) for a in argv)
        (conf_d / "sglang.conf").write_text(SGLANG_PROGRAM.format(command=command))
        lp("/srv/app").mkdir(exist_ok=True)
        shutil.copy(FAKE_LLM, lp(SERVICE_SCRIPT))
        if host.scenario.launch_script:
            host.set_next_start(host.scenario)
        write_scenario_files(lp, host.name, host.scenario)

    def _ready_checks(self, host: LabHost) -> list[tuple[str, Callable[[], object]]]:
        assert isinstance(host, NetnsHost) and host.proc is not None
        proc = host.proc

        def alive() -> None:
            if proc.poll() is not None:
                out = (host.host_dir / "supervisord.out").read_text(errors="replace")
                raise RuntimeError(f"{host.name}: supervisord exited: {out[-800:]}")

        def rpc_up() -> bool:
            # An RPC also wakes supervisord's 1 s poll loop, so programs spawn at once.
            alive()
            return host.supervisor_state("sglang") != ""

        def ssh_up() -> bool:
            alive()
            return net.ssh_banner(host.address, host.port).startswith(b"SSH-")

        def running() -> bool:
            alive()
            return host.supervisor_state("sglang") == "RUNNING"

        checks: list[tuple[str, Callable[[], object]]] = [
            ("supervisord", rpc_up), ("sshd", ssh_up), ("sglang RUNNING", running)]
        if host.scenario.startup_delay_s == 0:
            checks.append(("/health 200", lambda: host.health() == 200))
        return checks

    def _begin_stop(self, host: LabHost) -> None:
        # A lab host needs no graceful shutdown (supervisord would take >= 1 s per tick):
        # SIGKILL supervisord, sshd, sglang and any session at once through the cgroup.
        if isinstance(host, NetnsHost) and host.cgroup is not None:
            host.cgroup.kill_nowait()

    def _destroy(self, host: LabHost) -> None:
        assert isinstance(host, NetnsHost)
        if host.cgroup is not None:
            host.cgroup.kill()  # supervisord and everything it or sshd started
        if host.proc is not None:
            terminate(host.proc, signal.SIGKILL, timeout=10.0)  # reap the launcher PID
        if host.cgroup is not None:
            host.cgroup.remove()
            host.cgroup.remove_parent_if_empty()
        if host.net is not None:
            net.delete_host_net(host.net)


def _supervisor_quote(arg: str) -> str:
    """Quote one argument for supervisor's shlex-based command= parsing (and its %-expansion)."""
    arg = arg.replace("%", "%%")
    if arg and all(c.isalnum() or c in "-_./:=,@+" for c in arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


Lab = NetnsLab
__all__ = ["BINDS", "Lab", "NetnsHost", "NetnsLab", "Scenario"]
