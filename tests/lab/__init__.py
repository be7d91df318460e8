"""proofbot test lab: real SSH hosts in network namespaces (tier 2) and systemd-nspawn (tier 3).

require_root_netns() / require_nspawn() return a one-line reason why a tier cannot run here,
or None when it can. skip_or_fail(reason) turns such a reason into a skip on a developer's
machine, and into a failure where the labs are required (PROOFBOT_REQUIRE_LABS=1, or CI=true
when that variable is unset): a CI run that silently skipped every root-lab test would pass
while proving nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .sysutil import cgroup_layout, sh

REQUIRE_ENV = "PROOFBOT_REQUIRE_LABS"
# Comma-separated tiers ("tier2,tier3") to report as unavailable: how a test proves that a
# tier which cannot run fails the run when the labs are required, on a machine where it can run.
UNAVAILABLE_ENV = "PROOFBOT_LAB_UNAVAILABLE"
_TIER2_TOOLS = ["ip", "sshd", "ssh", "ssh-keygen", "supervisord", "supervisorctl", "nsenter",
                "curl", "mount"]
_TIER3_TOOLS = ["systemd-nspawn", "debootstrap"]
_SBIN = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _which(tool: str) -> bool:
    return shutil.which(tool, path=_SBIN + ":" + os.environ.get("PATH", "")) is not None


def labs_required() -> bool:
    """True when a lab tier that cannot run must fail the run instead of skipping."""
    value = os.environ.get(REQUIRE_ENV)
    if value is not None:
        return value == "1"
    return os.environ.get("CI", "").lower() == "true"


def _forced_unavailable(tier: str) -> str | None:
    if tier in os.environ.get(UNAVAILABLE_ENV, "").replace(" ", "").split(","):
        return f"{tier} lab made unavailable by {UNAVAILABLE_ENV}"
    return None


def require_root_netns() -> str | None:
    """Why tier 2 (namespace hosts) cannot run here, or None if it can."""
    forced = _forced_unavailable("tier2")
    if forced:
        return forced
    if os.geteuid() != 0:
        return "tier2 lab needs root (network namespaces, bind mounts)"
    missing = [t for t in _TIER2_TOOLS if not _which(t)]
    if missing:
        return f"tier2 lab needs {', '.join(missing)} (apt: openssh-server supervisor iproute2)"
    try:
        res = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"tier2 lab: `ip netns` unavailable ({exc})"
    if res.returncode != 0:
        return f"tier2 lab: `ip netns` unavailable ({res.stderr.decode().strip()[:120]})"
    layout = cgroup_layout(Path("/proc/self/mountinfo").read_text())
    if not layout.dirs:
        return ("tier2 lab needs cgroup2 or the v1 name=systemd hierarchy mounted under "
                "/sys/fs/cgroup (neither is in /proc/self/mountinfo)")
    return None


def _overlay_missing() -> str | None:
    """None once overlayfs is usable; it is a module, listed in /proc/filesystems once loaded."""
    if "overlay" in Path("/proc/filesystems").read_text():
        return None
    res = sh(["modprobe", "overlay"], check=False) if _which("modprobe") else None
    if "overlay" in Path("/proc/filesystems").read_text():
        return None
    why = res.stderr.strip()[:120] if res is not None else "no modprobe"
    return f"tier3 lab needs overlayfs (`modprobe overlay` failed: {why or 'no error text'})"


def require_nspawn() -> str | None:
    """Why tier 3 (systemd-nspawn hosts) cannot run here, or None if it can."""
    forced = _forced_unavailable("tier3")
    if forced:
        return forced
    reason = require_root_netns()
    if reason:
        return reason.replace("tier2", "tier3")
    missing = [t for t in _TIER3_TOOLS if not _which(t)]
    if missing:
        return f"tier3 lab needs {', '.join(missing)} (apt: systemd-container debootstrap)"
    return _overlay_missing()


def skip_or_fail(reason: str) -> None:
    """Skip with reason, or fail with it when the labs are required (see the module docstring)."""
    if labs_required():
        pytest.fail(f"{reason} [{REQUIRE_ENV}=1 or CI=true: a lab tier that cannot run is a failure]",
                    pytrace=False)
    pytest.skip(reason)


__all__ = ["labs_required", "require_nspawn", "require_root_netns", "skip_or_fail"]
