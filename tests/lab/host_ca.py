"""A throwaway SSH host CA for lab hosts: each host key signed by it (``ssh-keygen -s``), sshd told to present the cert.

Tests that trust hosts only through an ``@cert-authority`` line in known_hosts use it; a host
keeps its plain key too, so a known_hosts naming that key still works against it.
"""

from __future__ import annotations

import time
from pathlib import Path

from . import net
from .common import LabHost, make_keypair
from .sysutil import sh


def new_host_ca(path: Path) -> str:
    """Make the CA's key pair at path; return its public key line (what an @cert-authority line names)."""
    return make_keypair(path, "lab host CA")


def sign_host_key(host: LabHost, host_ca: Path, principals: list[str], sshd_config: str = "") -> None:
    """Sign host's ed25519 host key for principals, make its sshd present the certificate (plus any
    extra sshd_config lines) and restart it; returns once it listens on port 22 again."""
    key_pub = host.local_path("/etc/ssh/ssh_host_ed25519_key.pub")
    sh(["ssh-keygen", "-q", "-s", str(host_ca), "-I", f"{host.name}-host", "-h", "-n", ",".join(principals),
        "-V", "-1h:+52w", str(key_pub)])
    with host.local_path("/etc/ssh/sshd_config").open("a") as config:
        config.write(f"HostCertificate /etc/ssh/ssh_host_ed25519_key-cert.pub\n{sshd_config}")
    host.run(["supervisorctl", "restart", "sshd"])
    # Asked from inside the host's own netns: a host behind a bastion has no route from here.
    net.wait_until(f"{host.name}: sshd listening again with its certificate",
                   lambda: bool(host.net_run(["ss", "-Hltn", "sport = :22"], check=False).stdout.strip()),
                   time.monotonic() + 30)
