"""Owner and mode checks on the files that decide where proofbot connects and what it trusts.

Config files (the one named and every Included one): OpenSSH's rule as Debian's ssh 9.2 applies it
(readconf.c with Debian's secure_permissions): owned by root or this user, not writable by others, and
group-writable only when that group has no member but the owner; ssh refuses otherwise ("Bad owner
or permissions"). known_hosts, identity and certificate files, and every directory above them, are
held to the same rule by proofbot (stricter than ssh, which does not check them: a known_hosts file
another user can write lets them choose which host keys root trusts); a world-writable directory
with the sticky bit (/tmp) is allowed, since no one else can replace a file of ours in it. A private
key readable by others is refused as ssh refuses it ("UNPROTECTED PRIVATE KEY FILE").
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from commands.errors import InventoryError
from commands.ssh_config.defaults import CLIENT_KEYS, GLOBAL_KNOWN_HOSTS, KNOWN_HOSTS

FILE_DEFAULTS: dict[str, Any] = {"known_hosts": KNOWN_HOSTS, "client_keys": CLIENT_KEYS,
                                 "global_known_hosts": GLOBAL_KNOWN_HOSTS}
# (inventory key, the kind unsafe_file checks, how a message names it)
FILE_KEYS = (("known_hosts", "known_hosts", "known_hosts"), ("global_known_hosts", "known_hosts", "known_hosts"),
             ("client_keys", "identity", "client key"), ("client_certs", "certificate", "certificate"))
UNSAFE_ADVICE = ("it decides what proofbot, as root, trusts or logs in with: make it and its directories owned by "
                 "root or this user, writable by no one else")


class UnsafeFile(ValueError):
    """A config file ssh refuses to read (another user could have written it)."""


@lru_cache(maxsize=256)
def _group_is_only(gid: int, owner_uid: int, uid: int) -> bool:
    """Debian's rule for a group-writable file: the group's only member is the file's owner."""
    try:
        group = grp.getgrgid(gid)
        owner = pwd.getpwuid(owner_uid)
    except KeyError:
        return False
    members = 0
    for entry in pwd.getpwall():
        if entry.pw_gid == gid:
            members += 1
            if entry.pw_uid != uid:
                return False
    if group.gr_mem:
        members += 1
        if group.gr_mem[0] != owner.pw_name or len(group.gr_mem) > 1:
            return False
    return members > 0


def secure(info: os.stat_result, uid: int | None = None) -> bool:
    """Debian's secure_permissions(): owner root or uid, not world-writable, group-writable only as above."""
    uid = os.getuid() if uid is None else uid
    if info.st_uid not in (0, uid) or info.st_mode & stat.S_IWOTH:
        return False
    return not info.st_mode & stat.S_IWGRP or _group_is_only(info.st_gid, info.st_uid, uid)


def check_config_file(path: str, including: str) -> None:
    """An Included (or the named) config file: as ssh, refused when another user could have written it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return  # ssh skips a file that vanished between glob and open
    except OSError as exc:
        raise UnsafeFile(f"{including}: cannot read ssh config {path}: {exc.strerror}") from None
    if not secure(info):
        raise UnsafeFile(
            f"{including}: Bad owner or permissions on {path} (uid {info.st_uid}, "
            f"mode {stat.S_IMODE(info.st_mode):o}): ssh refuses it, and so does proofbot (it decides where "
            "proofbot connects and which host keys it trusts: make it owned by root or this user, chmod go-w)")


def _directories(path: str) -> list[str]:
    parents: list[str] = []
    current = os.path.dirname(os.path.abspath(path))
    while True:
        parents.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            return parents
        current = parent


def _unsafe_directory(directory: str, uid: int) -> str | None:
    try:
        info = os.stat(directory)
    except OSError:
        return None
    sticky = bool(info.st_mode & stat.S_ISVTX)
    if info.st_uid not in (0, uid) or (not sticky and not secure(info, uid)):
        return f"directory {directory} (uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o})"
    return None


def unsafe_file(path: str, kind: str) -> str | None:
    """Why proofbot will not read path as a known_hosts, key or certificate file; None when it may (or it is absent)."""
    try:
        info = os.stat(path)
    except OSError:
        return None  # an absent file is skipped, as ssh skips it
    uid = os.getuid()
    if not secure(info, uid):
        return f"{path} (uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}) can be written by another user"
    if kind == "identity" and info.st_uid == uid and info.st_mode & 0o077:
        return (f"{path} is readable by others (mode {stat.S_IMODE(info.st_mode):o}): ssh ignores such a key "
                "(UNPROTECTED PRIVATE KEY FILE); chmod 600 it")
    for directory in _directories(path):
        problem = _unsafe_directory(directory, uid)
        if problem is not None:
            return f"{path}: {problem} can be written by another user"
    return None


KeyPath = tuple[str, ...]


class UnsafeFiles(InventoryError):
    """Files another user could write (or a key others can read), each at the inventory key that names it:
    ``unsafe`` is (key path, message), the message the same for every host that shares the file."""

    def __init__(self, unsafe: list[tuple[KeyPath, str]]) -> None:
        super().__init__("\n".join(f"{'.'.join(path)}: {message}" for path, message in unsafe))
        self.unsafe = unsafe


def unsafe_files(name: str, ssh: Mapping[str, Any], origins: Mapping[str, str], context: str = ""
                 ) -> list[tuple[KeyPath, str]]:
    """Every known_hosts, identity and certificate file of host ``name`` that exists and is not safe from other
    users (``unsafe_file``), at the key that names it: the inventory's own key, the ``ssh.config`` key for a file
    the config decided, the top-level ``ssh`` key for proofbot's default."""
    found: list[tuple[KeyPath, str]] = []
    for key, kind, word in FILE_KEYS:
        value = ssh.get(key, FILE_DEFAULTS.get(key))
        # a value of the wrong type is the inventory check's to report (each problem at its key), not a crash here
        listed = tuple(map(str, value)) if isinstance(value, list | tuple) else ()
        paths = (value,) if isinstance(value, str) else listed
        for path in paths:
            problem = unsafe_file(os.path.expanduser(path), kind)
            if problem is not None:
                where, origin = _naming(name, key, origins)
                found.append((where, f"{context}{word} {problem}{origin}; {UNSAFE_ADVICE}"))
    return found


def _naming(name: str, key: str, origins: Mapping[str, str]) -> tuple[KeyPath, str]:
    """The inventory key where host ``name``'s value of ``key`` is written, and where it came from otherwise."""
    origin = origins.get(key, "default")
    if origin == f"inventory hosts.{name}.ssh.{key}":
        return ("hosts", name, "ssh", key), ""
    if origin == f"inventory ssh.{key}":
        return ("ssh", key), ""
    config = origins.get("config")
    if config is not None:  # the config decided it (or ssh's default, the config naming none)
        at = ("hosts", name, "ssh", "config") if config == f"inventory hosts.{name}.ssh.config" else ("ssh", "config")
        return at, f" ({'the default' if origin == 'default' else origin})"
    return ("ssh", key), " (proofbot's default)"


def clear_caches() -> None:
    """Tests change groups between loads."""
    _group_is_only.cache_clear()
