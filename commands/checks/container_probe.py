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

import difflib
import errno
import json
import os
import re
import shutil
import stat
import sys

# On the host this import is package_probe_fs's own text (commands.checks.container_files pastes it).
from commands.checks.package_probe_fs import CHUNK, MAX_FIELD, Link, Tree, file_facts

ROOT = re.compile(r"^/proc/[1-9][0-9]{0,9}/root$")
MAX_PATHS = 512
MAX_LISTED = 20000
MAX_DIFF_INPUT = 4 << 20  # bytes of a file a plan's diff reads
MAX_DIFF = 200_000  # characters of diff sent (as diff.DIFF_LIMIT)
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


def _read_at(tree: Tree, rel: str, limit: int) -> tuple[os.stat_result, bytes | None]:
    """A file inside the root, opened without following a link: its stat and up to ``limit`` bytes (None: more)."""
    fd = tree.open(rel)
    try:
        info = os.fstat(fd)
        data = b""
        while len(data) <= limit:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                return info, data
            data += chunk
        return info, None
    finally:
        os.close(fd)


def _source(path: str, limit: int) -> bytes | None:
    """The backup copy on the host (proofbot checked it stays inside its backup dir): never through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    return data if len(data) <= limit else None


def describe(tree: Tree, items: list[dict[str, str]]) -> None:
    """For a restore's plan: each live file's state, digest, mode, owner, and its diff with the backup copy."""
    for item in items[:MAX_PATHS]:
        live, rel = item["live"], rel_parts(item["live"])
        facts: dict[str, object] = file_facts(tree, rel, "sha256")[0] if rel else {"st": "other"}
        if facts.get("st") == "ok":
            try:
                info, data = _read_at(tree, rel, MAX_DIFF_INPUT)
                facts.update(mode=f"{stat.S_IMODE(info.st_mode):o}", owner=f"{info.st_uid}:{info.st_gid}",
                             mtime=info.st_mtime)
                source = _source(item["src"], MAX_DIFF_INPUT)
                if data is not None and source is not None:
                    lines = difflib.unified_diff(data.decode("utf-8", "replace").splitlines(True),
                                                 source.decode("utf-8", "replace").splitlines(True), live, item["src"])
                    facts["diff"] = "".join(lines)[:MAX_DIFF]
            except (OSError, Link) as exc:
                facts = {"st": "unreadable", "err": str(exc)[:300]}
        emit("file", p=live[:MAX_FIELD], **facts)


def copy_out(tree: Tree, items: list[dict[str, str]]) -> int:
    """For a restore's snapshot: each live file copied to a new file on the host (in proofbot's own mode-700 dir)."""
    for item in items[:MAX_PATHS]:
        rel = rel_parts(item["live"])
        try:
            source = tree.open(rel)
            with os.fdopen(source, "rb") as handle:
                out = os.open(item["dst"], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                with os.fdopen(out, "wb") as copy:
                    shutil.copyfileobj(handle, copy, CHUNK)
                    copy.flush()
                    os.fsync(copy.fileno())
        except (OSError, Link) as exc:
            emit(CANNOT, reason="copy", p=item["live"], err=_said(exc))
            return 1
        emit("copied", p=item["live"], dst=item["dst"])
    return 0


def write(tree: Tree, items: list[dict[str, str]]) -> int:
    """For a restore's replace: each backup copy written over its live file inside the root, atomically: a new
    file made with O_EXCL in the live file's dir (reached without following a link), the old file's owner and
    mode, fsync, then renamed over it in that same dir's descriptor. A link at the live path is refused."""
    for item in items[:MAX_PATHS]:
        parts = tuple(rel_parts(item["live"]).split("/"))
        temp = ""
        try:
            parent, name = tree.dir(parts[:-1]), parts[-1]
            try:
                old: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and not stat.S_ISREG(old.st_mode):
                what = "a symlink" if stat.S_ISLNK(old.st_mode) else "not a regular file"
                emit(CANNOT, reason="write", p=item["live"], err=f"the live file is {what}: not written")
                return 1
            temp = ".proofbot-" + os.urandom(12).hex()
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                          dir_fd=parent)
            with os.fdopen(out, "wb") as copy, \
                    os.fdopen(os.open(item["src"], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as source:
                shutil.copyfileobj(source, copy, CHUNK)
                copy.flush()
                if old is not None:
                    os.fchown(copy.fileno(), old.st_uid, old.st_gid)
                os.fchmod(copy.fileno(), stat.S_IMODE(old.st_mode) if old is not None else 0o644)
                os.fsync(copy.fileno())
            os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
            temp = ""
            os.fsync(parent)
        except (OSError, Link) as exc:
            emit(CANNOT, reason="write", p=item["live"], err=_said(exc))
            return 1
        finally:
            if temp:
                os.unlink(temp, dir_fd=parent)
        emit("written", p=item["live"])
    return 0


def _said(exc: Exception) -> str:
    if isinstance(exc, Link):
        return f"/{exc.at} inside the container is a symlink to {exc.target!r}: not followed"
    return str(exc)[:300]


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
    if "describe" in request:
        describe(tree, request["describe"])
    if "copy_out" in request:
        return copy_out(tree, request["copy_out"])
    if "write" in request:
        return write(tree, request["write"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
