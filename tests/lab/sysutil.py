"""Small system helpers for the lab: running commands, mounts, cgroups and process waits.

Everything here acts only on paths/PIDs handed in by the caller (never on name patterns).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CLEAN_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
}


def sh(argv: Sequence[str], check: bool = True, timeout: float = 60.0,
       input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run argv with a clean environment, capturing text output."""
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                         env=CLEAN_ENV, input=input, stdin=None if input else subprocess.DEVNULL)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} -> {res.returncode}: {res.stderr.strip()}")
    return res


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below path in this mount namespace, deepest first."""
    root = str(path.resolve())
    found: list[str] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = _unescape(line.split()[4])
            if mp == root or mp.startswith(root + "/"):
                found.append(mp)
    return sorted(set(found), key=lambda m: m.count("/"), reverse=True)


def unmount_under(path: Path) -> None:
    for mp in mounts_under(path):
        if sh(["umount", mp], check=False).returncode != 0:
            sh(["umount", "-l", mp], check=False)


def safe_rmtree(path: Path) -> None:
    """rm -rf that first detaches any mount below path (never follows into a mount)."""
    if not path.exists():
        return
    unmount_under(path)
    if mounts_under(path):
        raise RuntimeError(f"refusing to delete {path}: still has mounts")
    shutil.rmtree(path, ignore_errors=True)


def cmdline(pid: int) -> str:
    """A process's argv joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class CgroupLayout:
    """Where this machine mounts the cgroup hierarchies a lab host is placed in.

    unified-only (cgroup v2 at /sys/fs/cgroup, Debian's default): v2 only; hybrid (this lab
    machine: v1 controllers, name=systemd at /sys/fs/cgroup/systemd, v2 at
    /sys/fs/cgroup/unified): both, since systemd in a container looks at both; legacy: v1 only.
    """

    v2: Path | None  # the cgroup2 mount, whose cgroup.kill empties a whole subtree
    v1_systemd: Path | None  # the v1 name=systemd mount

    @property
    def name(self) -> str:
        if self.v2 is not None and self.v1_systemd is None:
            return "unified" if self.v2 == CGROUP_ROOT else f"unified at {self.v2}"
        if self.v2 is not None:
            return "hybrid"
        return "legacy" if self.v1_systemd is not None else "none"

    @property
    def dirs(self) -> list[Path]:
        return [d for d in (self.v1_systemd, self.v2) if d is not None]


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def cgroup_layout(mountinfo: str) -> CgroupLayout:
    """The cgroup layout described by /proc/self/mountinfo text (a pure function, so each
    layout is testable on any machine). Only mounts at or below /sys/fs/cgroup count; a later
    mount hides earlier ones at or below its mount point, as the kernel does."""
    visible: dict[Path, tuple[str, list[str]]] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        mount_point = Path(_unescape(fields[4]))
        if mount_point != CGROUP_ROOT and CGROUP_ROOT not in mount_point.parents:
            continue
        fstype, _source, options = [*line.split(" - ", 1)[1].split(), "", "", ""][:3]
        for hidden in [p for p in visible if p == mount_point or mount_point in p.parents]:
            del visible[hidden]
        visible[mount_point] = (fstype, options.split(","))
    v2 = next((p for p, (fs, _) in visible.items() if fs == "cgroup2"), None)
    v1_systemd = next((p for p, (fs, opts) in visible.items() if fs == "cgroup" and "name=systemd" in opts),
                      None)
    return CgroupLayout(v2=v2, v1_systemd=v1_systemd)


def current_cgroup_layout() -> CgroupLayout:
    return cgroup_layout(Path("/proc/self/mountinfo").read_text())


class Cgroup:
    """A cgroup created by this run in every hierarchy the machine's layout has (see CgroupLayout)."""

    def __init__(self, relpath: str, layout: CgroupLayout | None = None) -> None:
        self.layout = layout or current_cgroup_layout()
        if not self.layout.dirs:
            raise RuntimeError("no cgroup2 nor v1 name=systemd hierarchy under /sys/fs/cgroup")
        self.dirs = [base / relpath for base in self.layout.dirs]
        self.v2_dir = self.layout.v2 / relpath if self.layout.v2 is not None else None
        for d in self.dirs:
            d.mkdir(parents=True, exist_ok=True)

    def shell_join_lines(self) -> str:
        """Shell lines that move the running shell ($$) into this cgroup."""
        return "".join(f"echo $$ > {d}/cgroup.procs\n" for d in self.dirs)

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs:
            for procs in d.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    out.update(int(x) for x in procs.read_text().split())
        return out

    def kill_nowait(self) -> None:
        """SIGKILL everything in the cgroup once, without waiting."""
        if self.v2_dir is not None and (self.v2_dir / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.v2_dir / "cgroup.kill").write_text("1")
            return
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def kill(self, timeout: float = 5.0) -> None:
        """SIGKILL everything still in the cgroup (recursively) and wait until it is empty."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left:
                return
            killf = self.v2_dir / "cgroup.kill" if self.v2_dir is not None else None
            if killf is not None and killf.exists():
                with contextlib.suppress(OSError):
                    killf.write_text("1")
            else:
                for pid in left:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise RuntimeError(f"cgroup {self.dirs[0]} still has {sorted(left)}")
            time.sleep(0.05)

    def remove(self) -> None:
        for d in self.dirs:
            if not d.exists():
                continue
            subdirs = sorted((p for p in d.rglob("*") if p.is_dir()),
                             key=lambda p: len(p.parts), reverse=True)
            for sub in [*subdirs, d]:
                with contextlib.suppress(OSError):
                    sub.rmdir()

    def remove_parent_if_empty(self) -> None:
        for d in self.dirs:
            with contextlib.suppress(OSError):
                d.parent.rmdir()


def terminate(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM,
              timeout: float = 5.0) -> None:
    """Signal a process we started (by its recorded PID) and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=timeout)
