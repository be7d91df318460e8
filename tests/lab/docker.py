"""A private Docker engine for tests (root only): its own dockerd with its own socket, data and exec roots, no
iptables and no default bridge, optionally in a lab host's network namespace; the lab's bookworm rootfs
imported as a local image (no registry). Stopped by the PID it was started with."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.lab import UNAVAILABLE_ENV, require_root_netns
from tests.lab.sysutil import safe_rmtree, terminate

DOCKER = "/usr/bin/docker"  # Debian's docker.io client, matched to its dockerd (not any other docker on PATH)
DOCKERD = "/usr/sbin/dockerd"


def require_docker(what: str = "docker image test") -> str | None:
    """Why a private engine cannot run here, or None if it can."""
    if "docker" in os.environ.get(UNAVAILABLE_ENV, "").replace(" ", "").split(","):
        return f"docker made unavailable by {UNAVAILABLE_ENV}"  # how CI's fail-not-skip rule is shown to hold
    reason = require_root_netns()
    if reason:
        return reason.replace("tier2 lab", what)
    missing = [tool for tool in (DOCKER, DOCKERD) if not os.access(tool, os.X_OK)]
    if missing or not shutil.which("debootstrap", path="/usr/sbin:/usr/bin:/sbin:/bin"):
        return (f"{what} needs {', '.join(missing) or 'debootstrap'} "
                "(apt: docker.io debootstrap; scripts/setup installs them as root)")
    return None


@dataclass
class Engine:
    """A private dockerd: its own socket, data and exec roots; no iptables, no bridge."""

    root: Path
    proc: subprocess.Popen[bytes]

    @property
    def socket(self) -> str:
        return f"unix://{self.root}/sock"

    @property
    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.socket, "DOCKER_CONFIG": str(self.root / "config"),
                "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(self.root)}

    def docker(self, *args: str, check: bool = True, timeout: float = 120.0,
               stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([DOCKER, *args], env=self.env, capture_output=True, timeout=timeout,
                             input=stdin.decode() if stdin is not None else None, text=True)
        if check and res.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} exited {res.returncode}: {res.stderr[-2000:]}")
        return res

    async def docker_async(self, *args: str) -> tuple[int, str, str]:
        """For tests whose event loop also serves the fake Slack: a blocking call would starve it."""
        child = await asyncio.create_subprocess_exec(DOCKER, *args, env=self.env, stdin=asyncio.subprocess.DEVNULL,
                                                     stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(120):
            out, err = await child.communicate()
        return child.returncode if child.returncode is not None else -1, out.decode(), err.decode()

    def import_rootfs(self, rootfs: Path, tag: str) -> str:
        """The rootfs as a local image (as scripts/image imports its base); its ID."""
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            subprocess.run([DOCKER, "import", "-", tag], env=self.env, stdin=tar.stdout, capture_output=True,
                           timeout=300, check=True)
        finally:
            assert tar.stdout is not None
            tar.stdout.close()
            tar.wait(timeout=60)
        return self.docker("image", "inspect", "-f", "{{.Id}}", tag).stdout.strip()


def start_engine(netns: str | None = None) -> Engine:
    """A private dockerd, in the root network namespace or (``netns``) in a lab host's: then its
    ``--network host`` containers share that host's network. Only the network is entered: ``ip netns exec``
    would remount /sys and hide the cgroup mounts runc needs."""
    # Short path: the daemon's unix socket must fit in sun_path (108 bytes).
    root = Path(tempfile.mkdtemp(prefix=f"pbdock-{os.getpid()}-", dir="/var/tmp"))
    (root / "config").mkdir()
    enter = ["nsenter", f"--net=/run/netns/{netns}", "--"] if netns else []
    with open(root / "dockerd.log", "wb") as log:
        proc = subprocess.Popen(
            [*enter, DOCKERD, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
             "--pidfile", str(root / "dockerd.pid"), "-H", f"unix://{root}/sock", "--iptables=false",
             "--ip6tables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    engine = Engine(root, proc)
    deadline = time.monotonic() + 60
    while engine.docker("version", check=False, timeout=30).returncode != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_engine(engine)
            log_text = (root / "dockerd.log").read_text(errors="replace") if root.exists() else ""
            raise AssertionError(f"dockerd did not come up: {log_text[-1500:]}")
        time.sleep(0.2)
    return engine


def stop_engine(engine: Engine) -> None:
    # By the PID we started (nsenter execs dockerd): SIGTERM lets dockerd stop its containers and
    # containerd and unmount.
    terminate(engine.proc, timeout=60.0)
    safe_rmtree(engine.root)
