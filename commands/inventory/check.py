"""``inventory check``: beyond a valid file, what can be found wrong without connecting: known_hosts,
key and certificate files that are missing or unreadable, and hosts with nothing to verify.

Files another user can write are refused when the inventory loads (commands/ssh_config/files.py, for
every command), each at the key that names it; this adds what would only fail later, at connect time or as
an empty verify.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from commands.inventory.hosts import Host, Inventory
from commands.inventory.load import load_inventory
from commands.inventory.problems import KeyPath, Problems, compose_and_load, key_lines

NOTHING_TO_CHECK = ("add a `service:` (manager, unit, health_url), a `backups:` entry or `packages:` "
                    "(dists or deb) to its inventory entry")


def nothing_configured(host: Host) -> str | None:
    """Why verify has no check to run on host (None when it has one)."""
    if host.service or host.backups or (host.packages and (host.packages.dists or host.packages.deb)):
        return None
    return f"no service, backups or packages configured for {host.name}"


def check_inventory(path: Path) -> Inventory:
    """The inventory, or one InventoryError listing every problem (``FILE:LINE: KEY: message``)."""
    inventory = load_inventory(path)  # raises on what loading finds, files others can write included
    text = path.read_text(encoding="utf-8")
    root, _ = compose_and_load(text)
    lines: dict[KeyPath, int] = {}
    if root is not None:
        key_lines(root, (), lines, [])
    problems = Problems(str(path), lines)
    # a host that is another's hop (by name, or `user@bastion:port` reaching its address and port)
    hops: set[object] = {key for host in inventory.hosts.values() for hop in host.ssh.jump
                         for key in (hop.name, (hop.address, hop.port))}
    for host in inventory.hosts.values():
        for where, key, message in _file_problems(host):
            problems.add(where, message, key=key)  # a top-level file shared by every host: said once
        why = nothing_configured(host)
        if why is not None and host.name not in hops and (host.address, host.port) not in hops:
            problems.add(("hosts", host.name), f"{why}: verify would have nothing to prove; {NOTHING_TO_CHECK}")
    for index, policy in enumerate(inventory.policies):
        from commands.inventory.policies import never_satisfied  # loaded with the policies (verify.plan imports us)

        if (why := never_satisfied(policy)) is not None:
            problems.add(("policies", index), why, key=f"policies[{index}]")
    problems.raise_if_any()
    return inventory


def _file_problems(host: Host) -> list[tuple[KeyPath, str, str]]:
    """Files written for host that cannot be read, and no known_hosts or no key at all (defaults
    that are absent are skipped, as ssh skips them, unless nothing is left)."""
    ssh = host.ssh
    found: list[tuple[KeyPath, str, str]] = []
    tried = [*ssh.known_hosts_list(), *ssh.global_known_hosts]
    if all(_unreadable(path) is not None for path in tried):
        found.append(_at(host, "known_hosts", "no known_hosts file can be read (" + ", ".join(
            _unreadable(path) or path for path in tried) + "): proofbot checks every host key and will not "
            "connect; add the host's key to one (ssh-keyscan, then compare its fingerprint out of band) "
            "or set ssh.known_hosts"))
        named = []
    else:
        named = [("known_hosts", "known_hosts", ssh.known_hosts_list()),
                 ("global_known_hosts", "global known_hosts", ssh.global_known_hosts)]
    if not ssh.agent and all(_unreadable(path) is not None for path in ssh.client_keys):
        found.append(_at(host, "client_keys", "no client key can be read (" + ", ".join(
            _unreadable(path) or path for path in ssh.client_keys) + ") and ssh.agent is off: proofbot cannot "
            "log in; set ssh.client_keys or ssh.agent: true"))
    else:
        named.append(("client_keys", "client key", ssh.client_keys))
    named.append(("client_certs", "certificate", ssh.client_certs))
    for key, kind, paths in named:
        for path in paths:
            problem = _unreadable(path)
            if problem is not None and (_written(host, key) or key == "client_certs"):
                found.append(_at(host, key, f"{kind} {problem}"))
    return found


def _written(host: Host, key: str) -> bool:
    return host.origins.get(key, "default") != "default"


def _at(host: Host, key: str, message: str) -> tuple[KeyPath, str, str]:
    """Where the value of ``key`` for host was written: its inventory key, else the host's ssh key
    with where the value came from (proofbot's default, a line of the ssh config)."""
    origin = host.origins.get(key, "default")
    own = f"hosts.{host.name}."
    if origin.startswith("inventory "):
        written = origin.removeprefix("inventory ")
        if written.startswith(own):
            return ("hosts", host.name, *written.removeprefix(own).split(".")), written, message
        return tuple(written.split(".")), written, message
    source = "proofbot's default" if origin == "default" else origin
    return ("hosts", host.name, "ssh"), f"{own}ssh.{key}", f"{message} (from {source})"


def _unreadable(written: str) -> str | None:
    """Why the file cannot be read (missing, not a regular file, permission), or None. Opened without
    blocking: a FIFO planted as a known_hosts file must not hang the check."""
    path = os.path.expanduser(written)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return f"{path} does not exist"
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"{path} is not a regular file"
        os.read(fd, 1)
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror}"
    finally:
        os.close(fd)
    return None
