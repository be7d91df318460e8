"""Runs ON THE HOST, under ``package_guard``'s root-owned interpreter: reads files inside a container from the
host through ``/proc/<pid>/root``, every component opened with ``O_NOFOLLOW`` from that root by
``package_probe_fs.Tree`` (a symlink or ``..`` in the container is reported, never followed onto the host).

``sh -c <guard> - <probe> /proc/PID/root REQUEST``: REQUEST is JSON, ``{"hash": [paths]}`` (one JSON line per
path: its sha-256, size, or why not) or ``{"list": [paths]}`` (records as ``find -printf '%T@\\t%p\\0'`` prints
them, so ``file_times`` parses them: a dir's regular files, a file itself, find's words for a missing path, and a
record that does not parse for anything not followed). Nothing runs inside the container; proofbot never imports
this file (``commands.checks.container_files`` pastes it with ``package_probe_fs`` as one text).
Written for the oldest Python a host may run (3.8).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys

# On the host this import is package_probe_fs's own text (commands.checks.container_files pastes it).
from commands.checks.package_probe_fs import MAX_FIELD, Link, Tree, file_facts

ROOT = re.compile(r"^/proc/[1-9][0-9]{0,9}/root$")
MAX_PATHS = 512
MAX_LISTED = 20000
NO_ACCESS = 4  # exit status: the container's root could not be opened
# The record this probe prints when it reads nothing: a word of its own line protocol (file, error), which
# container_files reads; not a check status.
CANNOT = "error"


def emit(kind: str, **fields: object) -> None:
    fields["t"] = kind
    sys.stdout.write(json.dumps(fields, ensure_ascii=True, sort_keys=True) + "\n")


def rel_parts(path: str) -> str:
    """A container path relative to its root, resolved lexically (``/a/../b`` is ``/b``, never above ``/``)."""
    return os.path.normpath("/" + path).lstrip("/")


def hash_paths(tree: Tree, paths: list[str]) -> None:
    for path in paths[:MAX_PATHS]:
        rel = rel_parts(path)
        facts, _, _ = file_facts(tree, rel, "sha256") if rel else ({"st": "other"}, b"", b"")
        if "via" in facts:  # file_facts names the link by its host path; the container's path is what is meant
            facts["via"] = "/" + os.path.relpath(str(facts["via"]), tree.path)
        emit("file", p=path[:MAX_FIELD], **facts)


def _record(path: str, mtime: float) -> None:
    sys.stdout.write(f"{mtime:.10f}\t{path}\0")


def _not_followed(path: str, why: str) -> None:
    # Not MTIME<TAB>/PATH: file_times keeps it as a record that does not parse, so no verdict rests on the listing.
    sys.stdout.write(f"proofbot: {path} inside the container {why}: not followed\0")


def list_paths(tree: Tree, paths: list[str]) -> None:
    listed = 0
    for path in paths[:MAX_PATHS]:
        rel = rel_parts(path)
        shown = "/" + rel
        try:
            fd = tree.open(rel) if rel else os.dup(tree.fd)
        except Link as link:
            _not_followed(shown, f"is reached through the symlink /{link.at} -> {link.target!r}"
                          if link.at != rel else f"is a symlink to {link.target!r}")
            continue
        except FileNotFoundError:
            sys.stdout.write(f"find: '{shown}': No such file or directory\n")
            continue
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                sys.stdout.write(f"find: '{shown}': No such file or directory\n")
            else:
                _not_followed(shown, f"cannot be read ({exc.strerror or exc})")
            continue
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                _record(shown, info.st_mtime)
            elif stat.S_ISDIR(info.st_mode):
                with os.scandir(fd) as entries:
                    for entry in entries:
                        listed += 1
                        if listed > MAX_LISTED:
                            _not_followed(shown, f"holds more than {MAX_LISTED} entries")
                            return
                        entry_info = entry.stat(follow_symlinks=False)
                        if stat.S_ISREG(entry_info.st_mode):  # as find -type f: no link, no dir
                            _record(shown.rstrip("/") + "/" + entry.name, entry_info.st_mtime)
        finally:
            os.close(fd)


def main(root: str, request_text: str) -> int:
    if not ROOT.match(root):
        emit(CANNOT, reason="bad-root", root=root[:100])
        return 2
    request = json.loads(request_text)
    try:
        tree = Tree("/", root)
    except OSError as exc:  # rootless engines, a root without CAP_SYS_PTRACE over the container: EACCES/EPERM
        why = exc.strerror or str(exc)
        if "list" in request:  # a record that does not parse: the listing is an error that says why
            sys.stdout.write(f"proofbot: could not check: no access to the container's root ({why})\0")
        else:
            emit(CANNOT, reason="no-access", err=why, errno=exc.errno or 0)
        return NO_ACCESS
    root_info, host_root = os.fstat(tree.fd), os.stat("/")
    if (root_info.st_dev, root_info.st_ino) == (host_root.st_dev, host_root.st_ino):
        # A PID reused by a host process (the container gone since its inspect): its root is the host's own.
        why = "the PID's root is the host's own root, not a container's (did the container stop?)"
        if "list" in request:
            sys.stdout.write(f"proofbot: could not check: {why}\0")
        else:
            emit(CANNOT, reason="host-root", err=why)
        return NO_ACCESS
    if "hash" in request:
        hash_paths(tree, [str(p) for p in request["hash"]])
    if "list" in request:
        list_paths(tree, [str(p) for p in request["list"]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
