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
from pathlib import Path

CGROUP_V1_SYSTEMD = Path("/sys/fs/cgroup/systemd")
CGROUP_UNIFIED = Path("/sys/fs/cgroup/unified")
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
            mp = line.split()[4].replace("\\040", " ")
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


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Cgroup:
    """A cgroup created by this run in both the v1 name=systemd and the unified hierarchy."""

    def __init__(self, relpath: str) -> None:
        self.dirs = [base / relpath for base in (CGROUP_V1_SYSTEMD, CGROUP_UNIFIED)
                     if base.is_dir()]
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
        for d in self.dirs:
            if d.is_relative_to(CGROUP_UNIFIED) and (d / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (d / "cgroup.kill").write_text("1")
                return
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def kill(self, timeout: float = 5.0) -> None:
        """SIGKILL everything still in the cgroup (recursively) and wait until it is empty."""
        unified = [d for d in self.dirs if d.is_relative_to(CGROUP_UNIFIED)]
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left:
                return
            killf = unified[0] / "cgroup.kill" if unified else None
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
