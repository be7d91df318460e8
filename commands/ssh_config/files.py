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
from functools import lru_cache


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


def clear_caches() -> None:
    """Tests change groups between loads."""
    _group_is_only.cache_clear()
