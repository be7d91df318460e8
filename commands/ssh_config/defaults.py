"""The one home of what SSH values are when nothing is written: OpenSSH's defaults (``ssh -G``), proofbot's own
(the inventory's ``ssh:`` keys), the hop limit, and what a user name and a host address may be."""

from __future__ import annotations

import re

# OpenSSH 9.2's (pathnames.h, readconf.c): what ``ssh -G`` gives when neither the command line nor a config says.
OPENSSH_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
                      "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa")
OPENSSH_USER_HOSTFILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
SYSTEM_HOSTFILES = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")  # GlobalKnownHostsFile: both agree

# proofbot's, without ``ssh.config``: one key, one known_hosts file (the inventory's ``ssh:`` defaults).
USER = "root"
KNOWN_HOSTS = "~/.ssh/known_hosts"
CLIENT_KEYS = ("~/.ssh/id_ed25519",)
GLOBAL_KNOWN_HOSTS = SYSTEM_HOSTFILES

MAX_HOPS = 8  # a chain of jump hosts, written (``ssh.jump``) or from the config's ProxyJump
USER_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")  # what useradd accepts: nothing a shell or ssh reads otherwise
ADDRESS = re.compile(r"[A-Za-z0-9.:-]{1,253}")  # a host name, IPv4 or IPv6 address; no brackets, no spaces
