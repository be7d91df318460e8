"""A private Podman for tests (root only), run INSIDE a tier-2 namespace host: its own containers.conf (runc, not
crun; ulimits at or below root's hard limit), its own --root/--runroot/--tmpdir from the very first call, held in a
root-only wrapper script that the inventory names as the engine's CLI (an SSH session carries no environment).
The lab's bookworm rootfs is imported once (no registry) into an image store in the lab cache that every run
reads as Podman's read-only additional image store: an import and its removal cost ~45 s of disk each run.
Nothing to stop but the containers: Podman has no daemon."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab import UNAVAILABLE_ENV, require_root_netns
from tests.lab.image import CACHE_DIR, RECIPE, ensure_image
from tests.lab.netns import BINDS, NetnsHost
from tests.lab.sysutil import CLEAN_ENV, safe_rmtree

PODMAN = "/usr/bin/podman"  # Debian's 4.3.1
IMAGE = "localhost/bookworm"  # in the cached store; runs say --pull=never (nothing is ever pulled)
STORE_RECIPE = f"proofbot-lab podman store v1: podman import of {RECIPE}"
NEEDED = (PODMAN, "/usr/sbin/runc", "/usr/bin/conmon", "/usr/libexec/podman/catatonit")
# Root here lacks CAP_SYS_RESOURCE: ulimits above the hard limit fail setrlimit; crun 1.8 refuses hybrid cgroups.
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile={nofile}:{nofile}", "nproc=32768:32768"]

[engine]
runtime = "runc"

[network]
network_config_dir = "{cni}"
"""
CNI_STATE = Path("/var/lib/cni/networks")  # host-local IPAM's leases, per network name, on the machine's disk


def require_podman(what: str = "podman lab") -> str | None:
    """Why a private Podman cannot run here, or None if it can."""
    if "podman" in os.environ.get(UNAVAILABLE_ENV, "").replace(" ", "").split(","):
        return f"podman made unavailable by {UNAVAILABLE_ENV}"  # how CI's fail-not-skip rule is shown to hold
    reason = require_root_netns()
    if reason:
        return reason.replace("tier2 lab", what)
    missing = [tool for tool in NEEDED if not os.access(tool, os.X_OK)]
    if missing or not shutil.which("debootstrap", path="/usr/sbin:/usr/bin:/sbin:/bin"):
        return (f"{what} needs {', '.join(missing) or 'debootstrap'} "
                "(apt: podman runc catatonit debootstrap; scripts/setup installs them as root)")
    return None


@dataclass
class Podman:
    """Podman as one namespace host runs it: every call enters the host's network and mount namespaces."""

    root: Path
    host: NetnsHost
    networks: list[str] = field(default_factory=list)

    @property
    def cli(self) -> str:
        """The wrapper: ``podman`` with this lab's containers.conf and storage, for the inventory's `engine:`."""
        return str(self.root / "podman")

    def enter(self) -> list[str]:
        return ["nsenter", "-t", str(self.host.pid), "-n", "-m", "--"]

    def podman(self, *args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([*self.enter(), self.cli, *args], env=CLEAN_ENV, capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
        if check and res.returncode != 0:
            raise AssertionError(f"podman {shlex.join(args)} exited {res.returncode}: {res.stderr[-2000:]}")
        return res

    def inspect(self, name: str, template: str) -> str:
        return self.podman("inspect", "--type", "container", "--format", template, name).stdout.strip()

    def bridge(self, subnet: str) -> str:
        """A CNI bridge network that exists only in the host's network namespace (its config in this lab's own
        directory, its name unique to this run); its name."""
        name = f"pbnet{os.getpid()}x{len(self.networks)}"
        self.networks.append(name)
        self.podman("network", "create", "--subnet", subnet, name)
        return name

    def net_namespace(self, name: str) -> str:
        """The network namespace the container's PID 1 is in (``net:[inode]``), read here from /proc."""
        return os.readlink(f"/proc/{self.inspect(name, '{{.State.Pid}}')}/ns/net")


def _cgroup_mounts() -> str:
    """Shell text that mounts this machine's cgroup hierarchies at /sys/fs/cgroup again: `ip netns exec` gave the
    host a fresh /sys without them, and Podman's CLI (runc, conmon) runs in the host, not in a daemon."""
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    if any(fields[1] == "/sys/fs/cgroup" and fields[2] == "cgroup2" for fields in mounts):
        return "set -e\nmount -t cgroup2 cgroup2 /sys/fs/cgroup\n"  # the unified layout: one hierarchy
    lines = ["mount -t tmpfs -o mode=755 pb-cgroup /sys/fs/cgroup"]
    for _, target, fstype, options, *_ in mounts:
        if not target.startswith("/sys/fs/cgroup/") or fstype not in ("cgroup", "cgroup2"):
            continue
        kept = [opt for opt in options.split(",") if opt not in ("rw", "relatime", "nosuid", "nodev", "noexec")]
        if kept and all(opt.startswith("name=") for opt in kept):
            kept.insert(0, "none")  # a named hierarchy without controllers
        opts = f"-o {shlex.quote(','.join(kept))} " if kept else ""
        lines.append(f"mkdir -p {shlex.quote(target)} && mount -t {fstype} {opts}{fstype} {shlex.quote(target)}")
    return "set -e\n" + "\n".join(lines) + "\n"


def _write_conf(root: Path) -> Path:
    nofile = int(subprocess.run(["sh", "-c", "ulimit -Hn"], capture_output=True, text=True, check=True).stdout)
    (root / "containers.conf").write_text(CONTAINERS_CONF.format(nofile=min(nofile, 20000), cni=root / "cni"))
    return root / "containers.conf"


def _storage_flags(root: Path) -> list[str]:
    return [arg for flag in ("root", "runroot", "tmpdir") for arg in (f"--{flag}", str(root / flag))]


def store_home() -> Path:
    """Where the image store is kept: the lab cache, unless a lab host cannot see that path (its /tmp, /root, /srv
    and /run are its own: netns BINDS; a clone under /tmp, as CI's may be), then a root-only directory under
    /var/tmp named after the cache's path."""
    cache = CACHE_DIR.resolve()
    if not any(cache == Path(prefix) or Path(prefix) in cache.parents for prefix in BINDS):
        return cache
    home = Path("/var/tmp") / f"proofbot-podman-{hashlib.sha256(str(cache).encode()).hexdigest()[:12]}"
    home.mkdir(mode=0o700, exist_ok=True)
    info = home.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
        raise AssertionError(f"podman lab: {home} is not a root-only directory; remove it")
    return home


def ensure_store() -> Path:
    """The image store holding the lab's rootfs as IMAGE, built once per cache (under a lock, its marker last)."""
    home = store_home()
    store, marker = home / "podman-bookworm", home / "podman-bookworm.ok"
    if marker.exists() and marker.read_text() == STORE_RECIPE:
        return store
    rootfs, _ = ensure_image()
    with open(home / "podman-bookworm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run builds; we wait and reuse
        if marker.exists() and marker.read_text() == STORE_RECIPE:
            return store
        marker.unlink(missing_ok=True)
        safe_rmtree(store)
        work = Path(tempfile.mkdtemp(prefix=f"pbpod-build-{os.getpid()}-", dir="/var/tmp"))
        try:
            env = {**CLEAN_ENV, "CONTAINERS_CONF": str(_write_conf(work))}
            argv = [PODMAN, "--root", str(store), "--runroot", str(work / "run"), "--tmpdir", str(work / "tmp"),
                    "import", "-", IMAGE]
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
            try:
                res = subprocess.run(argv, env=env, stdin=tar.stdout, capture_output=True, timeout=600)
            finally:
                assert tar.stdout is not None
                tar.stdout.close()
                tar.wait(timeout=60)
            if res.returncode != 0:
                raise AssertionError(f"podman import exited {res.returncode}: {res.stderr.decode()[-1500:]}")
        finally:
            safe_rmtree(work)
        marker.write_text(STORE_RECIPE)  # written last: the store is complete
    return store


def start_podman(host: NetnsHost) -> Podman:
    """Podman for ``host``: its cgroup mounts, a private storage over the cached image store and its own
    configuration, checked by ``podman info``."""
    store = ensure_store()
    root = Path(tempfile.mkdtemp(prefix=f"pbpod-{os.getpid()}-", dir="/var/tmp"))  # 0700, root's
    conf = _write_conf(root)
    flags = [*_storage_flags(root), "--storage-driver", "overlay", "--storage-opt", f"overlay.imagestore={store}"]
    (root / "podman").write_text(f"#!/bin/sh\nCONTAINERS_CONF={shlex.quote(str(conf))} "
                                 f"exec {PODMAN} {shlex.join(flags)} \"$@\"\n")
    os.chmod(root / "podman", 0o700)
    podman = Podman(root, host)
    cgroups = host.run(["sh", "-c", _cgroup_mounts()], check=False)
    if cgroups.returncode != 0:
        raise AssertionError(f"podman lab: could not mount the cgroup hierarchies in {host.name}: {cgroups.stderr}")
    info = podman.podman("info", "--format", "{{.Host.OCIRuntime.Name}} {{.Host.CgroupsVersion}}", check=False)
    if info.returncode != 0 or not info.stdout.startswith("runc "):
        stop_podman(podman)
        raise AssertionError(f"podman will not start in {host.name}: {info.stdout}{info.stderr[-1500:]}")
    return podman


def stop_podman(podman: Podman) -> None:
    """Every container gone (no wait for a stop: no daemon owns them, the lab's teardown would not reach them),
    then the storage removed; its overlay mounts live in the host's mount namespace and end with it."""
    podman.podman("rm", "--all", "--force", "--time", "0", check=False, timeout=120)
    for network in podman.networks:
        podman.podman("network", "rm", "--force", network, check=False)
        safe_rmtree(CNI_STATE / network)
    _wait_for_cleanups(podman.root)
    safe_rmtree(podman.root)


def _wait_for_cleanups(root: Path, timeout_s: float = 20.0) -> None:
    """conmon starts `podman --root ROOT … container cleanup` when a container ends, possibly after `rm`
    returned: removed under it, it would create ROOT again. Wait (never kill) until no process names this run's
    own ROOT; a straggler past the deadline is left to the rmtree race, said in the log."""
    deadline = time.monotonic() + timeout_s
    marker = str(root).encode()
    while time.monotonic() < deadline:
        busy = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if marker in (entry / "cmdline").read_bytes():
                        busy.append(entry.name)
                except OSError:
                    continue  # gone
        if not busy:
            return
        time.sleep(0.1)
    print(f"podman lab: processes still naming {root} after {timeout_s:g} s", file=sys.stderr)
