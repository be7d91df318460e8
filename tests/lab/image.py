"""Builds once, and then reuses, the Debian bookworm root image for tier-3 (systemd) hosts.

The image lives in <repo>/.lab-cache/bookworm (git-ignored); bookworm.ok marks it complete.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

from .sysutil import pid_alive, safe_rmtree, sh

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("PROOFBOT_LAB_CACHE", str(REPO / ".lab-cache")))
SUITE = "bookworm"
PACKAGES = "systemd,systemd-sysv,dbus,openssh-server,python3,iproute2,procps,curl"
RECIPE = f"proofbot-lab image v1: debootstrap --variant=minbase --include={PACKAGES} {SUITE}\n"
# Units that only slow a container boot down or wait for things a lab host never has.
MASK = ["systemd-networkd-wait-online.service", "apt-daily.timer", "apt-daily-upgrade.timer",
        "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer", "systemd-timesyncd.service",
        "getty@tty1.service"]


def image_dir() -> Path:
    return CACHE_DIR / SUITE


def marker() -> Path:
    return CACHE_DIR / f"{SUITE}.ok"


def image_ready() -> bool:
    m = marker()
    return m.exists() and m.read_text() == RECIPE and (image_dir() / "usr/bin/python3").exists()


def apt_mirror() -> str:
    """The Debian archive URI that apt on this machine uses for the bookworm suite."""
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for f in files:
        if not f.is_file():
            continue
        text = f.read_text(errors="replace")
        for line in text.splitlines():  # one-line format: deb [opts] URI suite comps
            m = re.match(r"^\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m and m.group(2) == SUITE:
                return m.group(1)
        for stanza in re.split(r"\n\s*\n", text):  # deb822 format
            fields = {}
            for line in stanza.splitlines():
                if ":" in line and not line.lstrip().startswith("#"):
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
            if "deb" in fields.get("types", "").split() and \
                    SUITE in fields.get("suites", "").split() and fields.get("uris"):
                return fields["uris"].split()[0]
    raise RuntimeError("no bookworm mirror found in /etc/apt/sources.list*")


def _customize(root: Path) -> None:
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # every lab host gets its own key
    (root / "etc/resolv.conf").unlink(missing_ok=True)
    (root / "etc/resolv.conf").write_text("")
    (root / "etc/hostname").write_text("lab\n")
    for unit in MASK:
        link = root / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    for lists in (root / "var/lib/apt/lists").glob("*_Packages"):
        lists.unlink()


def ensure_image(log: Path | None = None) -> tuple[Path, float]:
    """Return (image dir, seconds spent building; 0.0 when the cache was reused)."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    if image_ready():
        return image_dir(), 0.0
    with open(CACHE_DIR / f"{SUITE}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run builds; we wait and reuse
        if image_ready():
            return image_dir(), 0.0
        for old in CACHE_DIR.glob(f"{SUITE}.build-*"):  # leftovers of dead builders only
            pid = old.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not pid_alive(int(pid)):
                safe_rmtree(old)
        tmp = CACHE_DIR / f"{SUITE}.build-{os.getpid()}"
        safe_rmtree(tmp)
        log = log or CACHE_DIR / "debootstrap.log"
        t0 = time.monotonic()
        try:
            res = sh(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE,
                      str(tmp), apt_mirror()], check=False, timeout=1800)
            log.write_text(res.stdout + res.stderr)
            if res.returncode != 0:
                raise RuntimeError(f"debootstrap failed ({res.returncode}); see {log}")
            _customize(tmp)
            marker().unlink(missing_ok=True)
            safe_rmtree(image_dir())
            tmp.rename(image_dir())
            marker().write_text(RECIPE)  # written last: the image is complete
        finally:
            safe_rmtree(tmp)
        return image_dir(), time.monotonic() - t0
