"""proofbot test lab: real SSH hosts in network namespaces (tier 2) and systemd-nspawn (tier 3).

require_root_netns() / require_nspawn() return a one-line skip reason, or None when runnable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

_TIER2_TOOLS = ["ip", "sshd", "ssh", "ssh-keygen", "supervisord", "supervisorctl", "nsenter",
                "curl", "mount"]
_TIER3_TOOLS = ["systemd-nspawn", "debootstrap"]
_SBIN = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _which(tool: str) -> bool:
    return shutil.which(tool, path=_SBIN + ":" + os.environ.get("PATH", "")) is not None


def require_root_netns() -> str | None:
    """Why tier 2 (namespace hosts) cannot run here, or None if it can."""
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
    if not Path("/sys/fs/cgroup/unified").is_dir() and not Path("/sys/fs/cgroup/systemd").is_dir():
        return "tier2 lab needs /sys/fs/cgroup/unified or /sys/fs/cgroup/systemd"
    return None


def require_nspawn() -> str | None:
    """Why tier 3 (systemd-nspawn hosts) cannot run here, or None if it can."""
    reason = require_root_netns()
    if reason:
        return reason.replace("tier2", "tier3")
    missing = [t for t in _TIER3_TOOLS if not _which(t)]
    if missing:
        return f"tier3 lab needs {', '.join(missing)} (apt: systemd-container debootstrap)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "tier3 lab needs overlayfs"
    return None


__all__ = ["require_nspawn", "require_root_netns"]
