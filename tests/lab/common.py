"""Shared lab pieces: the per-host file/flag scenario, SSH keys, LabHost base and Lab base.

Tier 2 (netns.py) and tier 3 (nspawn.py) subclass LabHost/BaseLab with the same public API.
"""

from __future__ import annotations

import atexit
import calendar
import contextlib
import json
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from . import net
from .sysutil import safe_rmtree, sh

FAKE_LLM = Path(__file__).resolve().parents[2] / "bot" / "demo" / "service.py"
SITE = "/root/ml-env/lib/python3.12/site-packages/sglang/srt"
SPEC_DIR = f"{SITE}/speculative"
BACKUP_DIR = "/root/sglang-ddtree-backup-20260522"
BACKUP_MTIME = calendar.timegm((2026, 5, 22, 10, 0, 0))
LIVE_FILES = {"spec_info.py": f"{SPEC_DIR}/spec_info.py",
              "eagle_info.py": f"{SPEC_DIR}/eagle_info.py",
              "server_args.py": f"{SITE}/server_args.py"}
HEALTH_URL = "http://127.0.0.1:30000/health"
CHAT_URL = "http://127.0.0.1:30000/v1/chat/completions"


def default_flags() -> list[str]:
    return ["--speculative-algorithm", "NEXTN"]


@dataclass
class Scenario:
    """What one host looks like before its service starts."""

    patched: bool = False  # live spec_info.py differs from the backup copy
    extra_file: bool = False  # live speculative/ has ddtree_utils.py, absent from the backup
    flags: list[str] = field(default_factory=default_flags)  # the seed's bad state adds
    api_key: str | None = None  # "--enable-ddtree"
    startup_delay_s: float = 0.0  # /health answers 503 for this long after each start
    reply: str = "OK"
    hang: bool = False  # chat completions never answer
    exit_after_s: float = 0.0  # the service crashes (exit 1) this long after each start
    ignore_sigterm: bool = False  # a stop hangs until the manager's kill timeout
    launch_script: bool = False  # the manager runs a shell launch script that execs the service,
    #                              so LabHost.set_next_start() changes the next start (as in the seed)
    start_gate: str = ""  # launch script only: a path on the host it waits for before it execs the service
    #                       (the new PID is up, nothing answers health) until the test opens the gate

    def service_argv(self, script: str) -> list[str]:
        argv = ["/usr/bin/python3", script, "--host", "127.0.0.1", "--port", "30000",
                *self.flags]
        if self.api_key:
            argv += ["--api-key", self.api_key]
        if self.startup_delay_s:
            argv += ["--startup-delay", str(self.startup_delay_s)]
        if self.reply != "OK":
            argv += ["--reply", self.reply]
        if self.hang:
            argv.append("--hang")
        if self.exit_after_s:
            argv += ["--exit-after", str(self.exit_after_s)]
        if self.ignore_sigterm:
            argv.append("--ignore-sigterm")
        return argv


def launch_script_text(argv: Sequence[str], gate: str = "") -> str:
    """A launch script that execs the service, so its PID is the manager's main PID; with ``gate``, only once
    that path exists."""
    wait = f"while [ ! -e {shlex.quote(gate)} ]; do sleep 0.05; done\n" if gate else ""
    return "#!/bin/sh\n# proofbot lab launch script\n" + wait + "exec " + shlex.join(argv) + "\n"


def _spec_info(host: str, patched: bool) -> str:
    extra = "    DDTREE = auto()  # ddtree patch\n" if patched else ""
    hook = ("\n\ndef is_ddtree(algo: SpeculativeAlgorithm) -> bool:  # ddtree patch\n"
            "    return algo == SpeculativeAlgorithm.DDTREE\n") if patched else ""
    return (f'"""Speculative decoding algorithms (lab copy on {host})."""\n'
            "from enum import IntEnum, auto\n\n\n"
            "class SpeculativeAlgorithm(IntEnum):\n"
            "    NONE = auto()\n    EAGLE = auto()\n    EAGLE3 = auto()\n    NEXTN = auto()\n"
            f"{extra}{hook}")


def _eagle_info(host: str) -> str:
    return (f'"""EAGLE draft/verify input holders (lab copy on {host})."""\n'
            "from dataclasses import dataclass\n\n\n@dataclass\nclass EagleVerifyInput:\n"
            "    draft_token_num: int = 4\n    topk: int = 1\n")


def _server_args(host: str) -> str:
    return (f'"""Server arguments (lab copy on {host})."""\n'
            "from dataclasses import dataclass\n\n\n@dataclass\nclass ServerArgs:\n"
            "    speculative_algorithm: str | None = None\n    enable_ddtree: bool = False\n"
            "    port: int = 30000\n")


def write_scenario_files(local: Any, host: str, sc: Scenario) -> None:
    """Write live + backup files; local(host_path) -> Path maps a host path to the root side."""
    clean = {"spec_info.py": _spec_info(host, False), "eagle_info.py": _eagle_info(host),
             "server_args.py": _server_args(host)}
    for fname, text in clean.items():
        bpath: Path = local(f"{BACKUP_DIR}/{fname}")
        bpath.parent.mkdir(parents=True, exist_ok=True)
        bpath.write_text(text)
        os.utime(bpath, (BACKUP_MTIME, BACKUP_MTIME))
        live: Path = local(LIVE_FILES[fname])
        live.parent.mkdir(parents=True, exist_ok=True)
        live.write_text(_spec_info(host, True) if fname == "spec_info.py" and sc.patched
                        else text)
    if sc.extra_file:
        local(f"{SPEC_DIR}/ddtree_utils.py").write_text(
            f'"""DDTree helpers added by the ddtree patch ({host})."""\nMAX_DEPTH = 8\n')


def make_keypair(path: Path, comment: str) -> str:
    """Generate an ed25519 key at path (+ .pub) and return the public key line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return path.with_name(path.name + ".pub").read_text().strip()


def known_hosts_line(address: str, port: int, pubkey: str) -> str:
    """OpenSSH known_hosts line: plain address for port 22, [address]:port otherwise."""
    who = address if port == 22 else f"[{address}]:{port}"
    return f"{who} {' '.join(pubkey.split()[:2])}"


@dataclass
class LabHost:
    """One lab host. Subclasses implement local_path() and run()."""

    name: str  # e.g. "ct129"
    address: str  # 10.231.R.x, reachable from the root namespace
    port: int  # 22
    known_hosts: Path  # the lab-wide known_hosts file (has this host's line)
    client_key: Path  # private key authorized for root on the host
    manager: str  # "supervisord" | "systemd"
    scenario: Scenario
    netns: str  # /run/netns/<netns>
    host_key_pub: str  # "ssh-ed25519 AAAA... comment"
    host_dir: Path  # this host's private working dir on the root side
    SERVICE_SCRIPT: ClassVar[str] = ""  # where the service script lives on the host (per tier)
    LAUNCH_SCRIPT: ClassVar[str] = ""  # the launch script of Scenario(launch_script=True)

    def local_path(self, host_path: str) -> Path:
        raise NotImplementedError

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 60.0,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        raise NotImplementedError

    def net_run(self, argv: Sequence[str], check: bool = True,
                timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a root-side binary (ip, iptables, curl) in this host's network namespace only;
        works on both tiers, e.g. net_run(["iptables", "-I", "INPUT", "-i", "eth0", "-j",
        "DROP"])."""
        return sh(["nsenter", f"--net=/run/netns/{self.netns}", "--", *argv],
                  check=check, timeout=timeout)

    def set_link(self, up: bool) -> None:
        """Bring the host's eth0 down/up (the root side keeps its address; no route leaks)."""
        self.net_run(["ip", "link", "set", "eth0", "up" if up else "down"])

    def known_hosts_line(self, address: str | None = None, port: int | None = None) -> str:
        """known_hosts line for this host's key, e.g. as reached through a proxy."""
        return known_hosts_line(address or self.address, port or self.port, self.host_key_pub)

    def ssh_argv(self, command: str, address: str | None = None,
                 port: int | None = None, known_hosts: Path | None = None) -> list[str]:
        """An `ssh` command line with strict host key checking against the lab file."""
        return ["ssh", "-o", f"UserKnownHostsFile={known_hosts or self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5",
                "-F", "/dev/null", "-i", str(self.client_key), "-p", str(port or self.port),
                f"root@{address or self.address}", command]

    def set_next_start(self, scenario: Scenario) -> None:
        """Rewrite the launch script (Scenario(launch_script=True) hosts only): the running
        process keeps its flags; the next start, by whoever, gets scenario's."""
        if not self.scenario.launch_script:
            raise ValueError(f"{self.name}: started without Scenario(launch_script=True)")
        self.local_path(self.LAUNCH_SCRIPT).write_text(
            launch_script_text(scenario.service_argv(self.SERVICE_SCRIPT), scenario.start_gate))

    def service_pid(self) -> int:
        """Current main PID of the sglang service (0 if not running)."""
        if self.manager == "supervisord":
            out = self.run(["supervisorctl", "pid", "sglang"], check=False).stdout.strip()
        else:
            out = self.run(["systemctl", "show", "sglang", "-p", "MainPID", "--value"],
                           check=False).stdout.strip()
        return int(out) if out.isdigit() else 0

    def health(self) -> int:
        """HTTP status of /health inside the host (0 if nothing answers)."""
        return net.http_status_in_netns(self.netns, HEALTH_URL)

    def service_block(self) -> dict[str, Any]:
        probe: dict[str, Any] = {
            "url": CHAT_URL, "timeout_s": 10, "expect": "OK",
            "json": {"model": "default", "messages": [{"role": "user", "content": "Say OK"}],
                     "max_tokens": 8}}
        if self.scenario.api_key:
            probe["headers"] = {"Authorization": f"Bearer {self.scenario.api_key}"}
        return {"manager": self.manager, "unit": "sglang", "health_url": HEALTH_URL,
                "expect_flags": ["--speculative-algorithm NEXTN"],
                "forbid_flags": ["--enable-ddtree"], "ready_timeout_s": 60,
                "min_startup_s": 0, "probe": probe}

    def backups_block(self) -> dict[str, Any]:
        return {"pre-ddtree": {"dir": BACKUP_DIR, "files": dict(LIVE_FILES),
                               "watch": [SPEC_DIR]}}

    def inventory_entry(self) -> dict[str, Any]:
        return {"address": self.address, "port": self.port, "service": self.service_block(),
                "backups": self.backups_block()}


class BaseLab:
    """Context manager owning a per-run /24, workdir, client key and known_hosts file."""

    tier = "base"

    def __init__(self, workdir: Path | None = None) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(
            tempfile.mkdtemp(prefix=f"proofbot-lab-{os.getpid()}-", dir="/var/tmp"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.known_hosts = self.workdir / "known_hosts"
        self.client_key = self.workdir / "client_ed25519"
        self.client_pub = ""
        self.hosts: dict[str, LabHost] = {}
        self.octet: int | None = None
        self.started_s = 0.0  # wall time of the last start() call

    # -- subclass hooks ------------------------------------------------------------
    def _launch(self, name: str, index: int, scenario: Scenario) -> LabHost:
        raise NotImplementedError

    def _ready_checks(self, host: LabHost) -> list[tuple[str, Callable[[], object]]]:
        """Ordered (what, probe) pairs; a probe returns truthy when passed (or raises)."""
        raise NotImplementedError

    def _begin_stop(self, host: LabHost) -> None:
        """Ask a host to shut down without waiting (so hosts stop in parallel)."""

    def _destroy(self, host: LabHost) -> None:
        raise NotImplementedError

    # -- public API ----------------------------------------------------------------
    def start(self, hosts: int | Sequence[str] = 1, scenario: Scenario | None = None,
              per_host: Mapping[str, Scenario] | None = None,
              timeout: float = 60.0) -> list[LabHost]:
        """Create hosts (default names ct129, ct130, ...), wait until SSH and /health answer."""
        t0 = time.monotonic()
        if self.octet is None:
            self.octet = net.claim_subnet()
            self.client_pub = make_keypair(self.client_key, "proofbot-lab-client")
            atexit.register(self.stop)
        if isinstance(hosts, int):
            first = 129 + len(self.hosts)
            names = [f"ct{first + i}" for i in range(hosts)]
        else:
            names = list(hosts)
        new: list[LabHost] = []
        try:
            for name in names:
                if name in self.hosts:
                    raise ValueError(f"host {name} already exists")
                sc = (per_host or {}).get(name) or scenario or Scenario()
                host = self._launch(name, len(self.hosts), sc)
                self.hosts[name] = host
                new.append(host)
            self._write_known_hosts()
            self._wait_all(new, time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - t0
        return new

    def _wait_all(self, hosts: list[LabHost], deadline: float) -> None:
        """Poll every new host's checks round-robin (so all hosts progress at once)."""
        pending = {h.name: self._ready_checks(h) for h in hosts}
        while pending:
            for name, checks in list(pending.items()):
                while checks and checks[0][1]():
                    checks.pop(0)
                if not checks:
                    del pending[name]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("lab hosts not ready: " + ", ".join(
                    f"{n} ({c[0][0]})" for n, c in pending.items()))
            time.sleep(0.03)

    def __getitem__(self, name: str) -> LabHost:
        return self.hosts[name]

    def _write_known_hosts(self) -> None:
        lines = [h.known_hosts_line() for h in self.hosts.values()]
        self.known_hosts.write_text("".join(line + "\n" for line in lines))

    def inventory(self, approvers: Sequence[str] = ("UAPPROVER",)) -> dict[str, Any]:
        """The proofbot inventory for all hosts of this lab (product-spec keys)."""
        return {
            "ssh": {"user": "root", "known_hosts": str(self.known_hosts),
                    "client_keys": [str(self.client_key)], "connect_timeout_s": 5,
                    "command_timeout_s": 20},
            "approvals": {"approvers": list(approvers), "allow_self_approval": False,
                          "expire_after_s": 900},
            "hosts": {n: h.inventory_entry() for n, h in self.hosts.items()},
        }

    def write_inventory(self, path: Path | None = None,
                        approvers: Sequence[str] = ("UAPPROVER",)) -> Path:
        """Write inventory as JSON (valid YAML) and return its path."""
        path = path or self.workdir / "inventory.yml"
        path.write_text(json.dumps(self.inventory(approvers), indent=2) + "\n")
        return path

    def stop(self) -> None:
        """Tear down every host this lab created, its subnet claim and its workdir."""
        errors: list[str] = []
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                self._begin_stop(host)
        for name in list(self.hosts)[::-1]:
            try:
                self._destroy(self.hosts.pop(name))
            except Exception as exc:  # keep tearing the rest down
                errors.append(f"{name}: {exc}")
        if self.octet is not None:
            net.release_subnet(self.octet)
            self.octet = None
            with contextlib.suppress(Exception):
                atexit.unregister(self.stop)
        if self._own_workdir:
            safe_rmtree(self.workdir)
        if errors:
            raise RuntimeError("lab teardown: " + "; ".join(errors))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
