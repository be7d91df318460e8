"""The host side's file system, for ``package_probe``: paths opened from ``/`` without following links.

Runs ON THE HOST as part of the probe's text (``commands.checks.package`` pastes it where
``package_probe`` imports it); never imported by proofbot itself. Every component is opened
with ``O_NOFOLLOW`` relative to its parent's fd, so a symlink anywhere is reported (where, and
the target it names), never followed, and a path cannot be swapped under the walk. Written
for the oldest Python a host may run (3.8).
"""

from __future__ import annotations

import base64
import errno
import grp
import hashlib
import os
import pwd
import stat

MAX_FIELD = 4096
MAX_SCRIPT = 1 << 16
MAX_OPEN_DIRS = 256
CHUNK = 1 << 20
DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO never hangs the open


class Link(Exception):
    """A symlink met on the way: where (relative to the walk's base) and the target it names."""

    def __init__(self, at: str, target: str) -> None:
        super().__init__(at)
        self.at, self.target = at, target


def _link_target(parent: int, name: str) -> str:
    try:
        return os.readlink(name, dir_fd=parent)[:MAX_FIELD]
    except OSError:
        return "?"


def open_at(parent: int, name: str, flags: int, at: str) -> int:
    """Open name in dir fd parent without following a link; a link raises ``Link``."""
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
            try:
                is_link = stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
            except OSError:
                is_link = False
            if is_link:
                raise Link(at, _link_target(parent, name)) from None
        raise


class Tree:
    """A directory reached from ``/`` without following links, and the paths below it, opened the same way."""

    def __init__(self, path: str, root: str = "/") -> None:
        self.path = os.path.normpath(path)
        self.root = root  # "/", or a container's /proc/PID/root: path is resolved inside it, never above it
        self.chain: list[tuple[str, os.stat_result]] = []  # every dir from / to path, for who can write it
        # A container's root is /proc/PID/root, a kernel link to its root dir: followed once, on purpose.
        fd = os.open(root, DIR if root == "/" else DIR & ~os.O_NOFOLLOW)
        walked = "/"
        for part in [p for p in self.path.split("/") if p]:
            self.chain.append((walked, os.fstat(fd)))
            walked = os.path.join(walked, part)
            try:
                child = open_at(fd, part, DIR, walked)
            finally:
                os.close(fd)
            fd = child
        self.chain.append((self.path, os.fstat(fd)))
        self.fd = fd
        self.owner = os.fstat(fd).st_uid
        self._dirs: dict[tuple[str, ...], int] = {}

    def dir(self, parts: tuple[str, ...]) -> int:
        if not parts:
            return self.fd
        if parts not in self._dirs:
            if len(self._dirs) >= MAX_OPEN_DIRS:
                self.forget()
            parent = self.dir(parts[:-1])
            self._dirs[parts] = open_at(parent, parts[-1], DIR, "/".join(parts))
        return self._dirs[parts]

    def open(self, rel: str) -> int:
        parts = tuple(p for p in rel.split("/") if p and p != ".")
        if ".." in parts:  # never above the walk's base (a container's root would lead onto the host)
            raise PermissionError(errno.EACCES, "a path with '..' is not followed", rel)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "the environment's own directory", rel)
        return open_at(self.dir(parts[:-1]), parts[-1], FILE, rel)

    def sub(self, rel: str) -> Tree:
        return Tree(os.path.join(self.path, rel), self.root)

    def forget(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()


def read_small(tree: Tree, rel: str, limit: int = 65536) -> str | None:
    try:
        fd = tree.open(rel)
    except (OSError, Link):
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or kept_from_others(tree, info):
            return None
        return handle.read(limit).decode("utf-8", "replace")


def kept_from_others(tree: Tree, info: os.stat_result) -> bool:
    """A hard link to a file another owner keeps from others: what it holds (or its digest) is not said."""
    return info.st_nlink > 1 and info.st_uid != tree.owner and not info.st_mode & stat.S_IROTH


def digest(fd: int, algorithm: str) -> tuple[int, bytes, bytes]:
    """Size, raw digest, and the file's head when it starts with #! (for a script's installer header)."""
    hasher = hashlib.new(algorithm)
    size = 0
    head = b""
    with os.fdopen(fd, "rb") as handle:
        chunk = handle.read(CHUNK)
        if chunk.startswith(b"#!"):
            head = chunk[:MAX_SCRIPT]
        while chunk:
            hasher.update(chunk)
            size += len(chunk)
            chunk = handle.read(CHUNK)
    return size, hasher.digest(), head


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def file_facts(tree: Tree, rel: str, algorithm: str) -> tuple[dict[str, object], bytes, bytes]:
    """What is at rel below tree, every component opened without following a link."""
    try:
        fd = tree.open(rel)
    except Link as link:
        facts: dict[str, object] = {"st": "link", "target": link.target}
        if link.at != rel:  # a dir on the way, not the file itself
            facts["via"] = os.path.join(tree.path, link.at)
        return facts, b"", b""
    except FileNotFoundError:
        return {"st": "missing"}, b"", b""
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return {"st": "other"}, b"", b""
        return {"st": "unreadable", "err": exc.strerror or str(exc)}, b"", b""
    except ValueError:  # a NUL in the name: no file can have it
        return {"st": "unreadable", "err": "not a valid file name"}, b"", b""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return {"st": "other"}, b"", b""
    if kept_from_others(tree, info):
        os.close(fd)
        return {"st": "hardlink", "uid": info.st_uid}, b"", b""
    try:
        size, raw, head = digest(fd, algorithm)
    except OSError as exc:
        return {"st": "unreadable", "err": exc.strerror or str(exc)}, b"", b""
    return {"st": "ok", "size": size, "a": algorithm, "d": b64(raw)}, raw, head


def installer_headers(prefix: str, version: str) -> list[bytes]:
    """The #! headers an installer writes for a script of this environment (pip/distlib, wheel's #!python)."""
    exes = [prefix + "/bin/python", prefix + "/bin/python3"] + ([prefix + "/bin/python" + version] if version else [])
    env = ["/usr/bin/env python", "/usr/bin/env python3"] + (["/usr/bin/env python" + version] if version else [])
    heads = [b"#!python\n"] + [("#!" + exe + "\n").encode() for exe in exes + env]
    for exe in exes:
        quoted = '"' + exe + '"' if " " in exe else exe
        if quoted != exe:
            heads.append(("#!" + quoted + "\n").encode())
        # distlib's form for a path over 127 bytes or with a space: sh runs the exec line, Python a string.
        heads.append(("#!/bin/sh\n'''exec' " + quoted + ' "$0" "$@"\n' + "' '''").encode())
    return heads


def script_header(head: bytes, recorded: bytes, algorithm: str, heads: list[bytes]) -> dict[str, object]:
    """Which installer header the script has now, and which one (if any) makes it equal RECORD's digest."""
    if head.startswith(b"#!/bin/sh\n'''exec' ") and b"\n' '''" in head:
        now = head[: head.index(b"\n' '''") + 6]
    else:
        now = head[: head.find(b"\n") + 1] if b"\n" in head else head
    rest = head[len(now):]
    matched = [h for h in heads if hashlib.new(algorithm, h + rest).digest() == recorded]
    facts: dict[str, object] = {"sbn": now.decode("utf-8", "replace")[:300], "sbi": now in heads}
    if matched:
        facts["sbr"] = matched[0].decode("utf-8", "replace")
    return facts


def writers(chain: list[tuple[str, os.stat_result]]) -> list[dict[str, object]]:
    """Who other than root can change the last path of chain (or any dir above it): owner, group, anyone."""
    found: dict[tuple[str, int], dict[str, object]] = {}  # each writer once, at the highest path it can write
    for path, info in chain:
        sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX  # only an entry's owner renames it
        if info.st_uid != 0:
            found.setdefault(("owner", info.st_uid), {"p": path, "via": "owner", "uid": info.st_uid,
                                                      "name": _name("pwd", info.st_uid)})
        if info.st_mode & stat.S_IWGRP and not sticky:
            found.setdefault(("group", info.st_gid), {"p": path, "via": "group", "gid": info.st_gid,
                                                      "name": _name("grp", info.st_gid)})
        if info.st_mode & stat.S_IWOTH and not sticky:
            found.setdefault(("anyone", 0), {"p": path, "via": "anyone"})
    return list(found.values())[:10]


def _name(table: str, number: int) -> str:
    try:
        return pwd.getpwuid(number).pw_name if table == "pwd" else grp.getgrgid(number).gr_name
    except (KeyError, OSError):
        return ""


def decode_recorded(recorded: str) -> bytes:
    encoded = recorded.partition("=")[2]
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except ValueError:
        return b""
