"""Runs ON THE HOST under a root-owned interpreter OUTSIDE the checked environment (see ``package_guard``).

``sh -c <guard> - <probe> PYTHON DIST``: the guard checks the interpreter, then execs it with
``-I -S -c <probe> PYTHON DIST``. The environment of PYTHON is only read, as data: never
executed, never imported from. Its prefix is PYTHON's grandparent; its site-packages come
from its layout and ``pyvenv.cfg`` read as text. Paths are opened by ``package_probe_fs``
(no link followed, nothing outside the prefix a site dir belongs to read). One JSON object
per line (names, sizes, digests, never contents); ``commands.checks.package`` judges.
Written for the oldest Python a host may run (3.8); never imported by proofbot.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import sys

# On the host this import is package_probe_fs's own text (commands.checks.package pastes it).
from commands.checks.package_probe_fs import (
    MAX_FIELD,
    Link,
    Tree,
    decode_recorded,
    file_facts,
    installer_headers,
    read_small,
    script_header,
    writers,
)

MAX_ROWS = 200000
MAX_EXTRAS = 200
ALGORITHMS = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")
# The record this probe prints when it cannot read the dist: a word of its own line protocol (its records are
# env, dist, row, extra, bad, cut, end and this), which package.py reads; not a check status.
UNREADABLE = "error"


def emit(kind: str, **fields: object) -> None:
    fields["t"] = kind
    # ensure_ascii: a name with a newline or odd bytes stays on one line, so framing holds.
    sys.stdout.write(json.dumps(fields, ensure_ascii=True, sort_keys=True) + "\n")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def config(tree: Tree, bin_dir: str) -> tuple[str, dict[str, str]]:
    """``pyvenv.cfg`` next to the interpreter or one up, as ``site.venv()`` looks for it, read as text."""
    for rel in (bin_dir + "/pyvenv.cfg", "pyvenv.cfg"):
        text = read_small(tree, rel)
        if text is not None:
            values: dict[str, str] = {}
            for line in text.splitlines():
                key, eq, value = line.partition("=")
                if eq:
                    values[key.strip().lower()] = value.strip()[:MAX_FIELD]
            return rel, values
    return "", {}


def cfg_version(values: dict[str, str]) -> str:
    found = re.match(r"(\d+\.\d+)", values.get("version") or values.get("version_info") or "")
    return found.group(1) if found else ""


def site_dirs(tree: Tree, version: str, links: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(site dir relative to the prefix, pythonX.Y) in ``site.getsitepackages()`` order, Debian's included."""
    found: list[tuple[str, str]] = []
    for libdir in ("local/lib", "lib", "lib64"):
        try:
            names = sorted(os.listdir(tree.dir(tuple(libdir.split("/")))))
        except Link as link:
            if libdir != "lib64":  # a venv's lib64 -> lib is how venv makes it
                links.append({"at": os.path.join(tree.path, link.at), "target": link.target})
            continue
        except OSError:
            continue
        wanted = [n for n in names if re.fullmatch(r"python\d+\.\d+", n) and (not version or n == "python" + version)]
        # Debian's order: /usr/lib/python3/dist-packages comes before /usr/lib/python3.X/dist-packages.
        for name in (["python3"] if libdir == "lib" and "python3" in names else []) + wanted:
            for leaf in ("dist-packages", "site-packages") if libdir != "lib64" else ("site-packages",):
                rel = "/".join((libdir, name, leaf))
                try:
                    tree.dir(tuple(rel.split("/")))
                except Link as link:
                    links.append({"at": os.path.join(tree.path, link.at), "target": link.target})
                    continue
                except OSError:
                    continue
                found.append((rel, name[6:]))
    return found


def check_record(tree: Tree, site: str, dist_info: str, heads: list[bytes]) -> tuple[set[str], set[str]] | None:
    """Emit one row per RECORD line; return the paths listed (relative to the prefix) and the package's top dirs.

    A row resolving outside the prefix is not read: a hostile RECORD could otherwise make the
    probe print the digest of any file root can read. Inside it, no link is followed either.
    """
    listed: set[str] = set()
    tops: set[str] = set()
    try:
        fd = tree.open(site + "/" + dist_info + "/RECORD")
    except FileNotFoundError:
        emit(UNREADABLE, reason="no-record", dist_info=os.path.join(tree.path, site, dist_info))
        return None
    except (OSError, Link) as exc:
        emit(UNREADABLE, reason="record-unreadable", detail=("a symlink: " + exc.target) if isinstance(exc, Link)
             else str(exc)[:300])
        return None
    try:
        with open(fd, encoding="utf-8", newline="") as record:
            for number, row in enumerate(csv.reader(record)):
                if number >= MAX_ROWS:
                    emit("cut", rows=number)
                    break
                if len(row) != 3:
                    emit("bad", n=number, fields=len(row), p=row[0][:MAX_FIELD] if row else "")
                    continue
                path, recorded, size = row
                rel = os.path.normpath(os.path.join(site, path))
                listed.add(rel)
                parts = os.path.relpath(rel, site).split(os.sep)
                if len(parts) > 1 and parts[0] not in ("..", dist_info, "__pycache__") \
                        and not parts[0].endswith(".data"):
                    tops.add(parts[0])
                algorithm = recorded.partition("=")[0]
                algorithm = algorithm if algorithm in ALGORITHMS else "sha256"
                if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
                    facts: dict[str, object] = {"st": "outside"}
                else:
                    facts, raw, head = file_facts(tree, rel, algorithm)
                    expected = decode_recorded(recorded)
                    if head and raw != expected and rel.startswith("bin/") and expected:
                        facts.update(script_header(head, expected, algorithm, heads))
                emit("row", n=number, p=path[:MAX_FIELD], h=recorded[:200], s=size[:40], **facts)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        emit(UNREADABLE, reason="record-unreadable", detail=str(exc)[:300])
        return None
    return listed, tops


def unlisted_files(tree: Tree, site: str, tops: set[str], listed: set[str]) -> tuple[list[str], int]:
    """Files and links in the package's top dirs that RECORD does not list; .pyc in __pycache__ only counted."""
    extras: list[str] = []
    pyc_ignored = 0
    for top in sorted(tops):
        rel_top = site + "/" + top
        try:
            top_fd = tree.dir(tuple(rel_top.split("/")))
        except Link:
            extras.append(rel_top)
            continue
        except OSError:
            continue
        # fwalk with dir fds never descends a link; a link to a dir comes back among the dirs.
        for current, dirs, files, dir_fd in os.fwalk(".", dir_fd=top_fd):
            here = os.path.normpath(os.path.join(rel_top, current))
            extras += [here + "/" + name for name in dirs if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)]
            for name in files:
                full = here + "/" + name
                if full in listed:
                    continue
                if os.path.basename(here) == "__pycache__" and name.endswith(".pyc") and \
                        stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode):
                    pyc_ignored += 1
                    continue
                extras.append(full)
    return extras, pyc_ignored


def claimed_by_others(tree: Tree, site: str, own: str, candidates: list[str]) -> set[str]:
    """Which candidates another dist's RECORD lists: namespace dirs (nvidia/, google/) are shared."""
    wanted = set(candidates)
    claimed: set[str] = set()
    for entry in os.listdir(tree.dir(tuple(site.split("/")))):
        if entry == own or not entry.endswith(".dist-info"):
            continue
        text = read_small(tree, site + "/" + entry + "/RECORD", 64 << 20) or ""
        try:
            for row in csv.reader(io.StringIO(text, newline="")):
                if row and os.path.normpath(os.path.join(site, row[0])) in wanted:
                    claimed.add(os.path.normpath(os.path.join(site, row[0])))
        except csv.Error:
            continue
    return claimed


def find_dist(tree: Tree, sites: list[tuple[str, str]], dist: str) -> list[tuple[str, str, str]]:
    matches: list[tuple[str, str, str]] = []
    for site, version in sites:
        for entry in sorted(os.listdir(tree.dir(tuple(site.split("/"))))):
            for suffix in (".dist-info", ".egg-info"):
                if entry.endswith(suffix) and normalise(entry[: -len(suffix)].split("-")[0]) == dist:
                    matches.append((site, version, entry))
    return matches


def environment(python: str, root: str = "/") -> tuple[Tree, list[tuple[Tree, list[tuple[str, str]]]]] | None:
    """The prefix of python and every (prefix, site dirs) to search, in ``site`` order; None once said why not.
    ``root``: a container's /proc/PID/root, every path resolved inside it (``commands.checks.container_files``)."""
    prefix = os.path.dirname(os.path.dirname(python))
    bin_dir = os.path.basename(os.path.dirname(python))  # "bin" but for an odd layout
    if root != "/" and not inside_a_container(root):
        return None
    try:
        tree = Tree(prefix, root)
        os.lstat(os.path.basename(python), dir_fd=tree.dir((bin_dir,)))
    except Link as link:
        emit(UNREADABLE, reason="path-link", at=link.at, target=link.target, prefix=prefix)
        return None
    except OSError as exc:
        emit(UNREADABLE, reason="no-interpreter", detail=exc.strerror or str(exc), prefix=prefix)
        return None
    cfg_at, values = config(tree, bin_dir)
    version = cfg_version(values)
    links: list[dict[str, str]] = []
    searched = [(tree, site_dirs(tree, version, links))]
    base = ""
    # As site.venv(): a pyvenv.cfg without the key means "true"; home names the base interpreter's dir.
    if cfg_at and values.get("include-system-site-packages", "true").lower() == "true" and values.get("home"):
        base = os.path.dirname(os.path.normpath(values["home"]))
        try:
            base_tree = Tree(base, root)
            searched.append((base_tree, site_dirs(base_tree, version, links)))
        except Link as link:
            links.append({"at": link.at, "target": link.target})
        except OSError:
            pass
    emit("env", python=python, prefix=prefix, cfg=cfg_at, home=values.get("home", "")[:MAX_FIELD], version=version,
         base=base, site=[os.path.join(t.path, s) for t, sites in searched for s, _ in sites], links=links[:20],
         hasher=sys.executable, hasher_version=sys.version.split()[0])
    return tree, searched


def inside_a_container(root: str) -> bool:
    """Whether root is a container's /proc/PID/root that can be entered and is not the host's own; else said."""
    if not re.match(r"^/proc/[1-9][0-9]{0,9}/root$", root):
        emit(UNREADABLE, reason="no-access", detail="not a container's root: " + root[:100])
        return False
    try:
        info, host = os.stat(root), os.stat("/")
    except OSError as exc:
        emit(UNREADABLE, reason="no-access", detail=exc.strerror or str(exc))
        return False
    if (info.st_dev, info.st_ino) == (host.st_dev, host.st_ino):
        emit(UNREADABLE, reason="no-access", detail="the PID's root is the host's own root, not a container's")
        return False
    return True


def main(python: str, dist: str, root: str = "/") -> int:
    found_env = environment(python, root)
    if found_env is None:
        return 3
    prefix_tree, searched = found_env
    found = [(tree, match) for tree, sites in searched for match in find_dist(tree, sites, dist)]
    if not found:
        emit(UNREADABLE, reason="not-installed", dist=dist)
        return 3
    tree, (site, version, dist_info) = found[0]
    if dist_info.endswith(".egg-info"):
        emit(UNREADABLE, reason="egg-info", dist_info=os.path.join(tree.path, site, dist_info))
        return 3
    base = site + "/" + dist_info
    metadata = read_small(tree, base + "/METADATA") or ""
    direct_url = read_small(tree, base + "/direct_url.json")
    editable, url = False, ""
    if direct_url:
        try:
            parsed = json.loads(direct_url)
            editable = bool((parsed.get("dir_info") or {}).get("editable"))
            url = str(parsed.get("url", ""))[:MAX_FIELD]
        except (ValueError, AttributeError):
            pass
    record = tree.sub(base)  # its chain: every dir from / to the dist-info, for who can rewrite RECORD
    chain = record.chain
    try:
        chain = [*chain, (record.path + "/RECORD", os.lstat("RECORD", dir_fd=record.fd))]
    except OSError:
        pass
    emit("dist", name=header(metadata, "Name"), version=header(metadata, "Version"),
         installer=(read_small(tree, base + "/INSTALLER", 100) or "").strip(),
         site=os.path.join(tree.path, site), dist_info=dist_info, editable=editable, url=url,
         others=[os.path.join(t.path, s, e) for t, (s, _, e) in found[1:]], writers=writers(chain))
    checked = check_record(tree, site, dist_info, installer_headers(prefix_tree.path, version))
    if checked is None:
        return 4
    listed, tops = checked
    extras, pyc_ignored = unlisted_files(tree, site, tops, listed)
    shared = claimed_by_others(tree, site, dist_info, extras) if extras else set()
    shown = 0
    for full in extras:
        if full in shared:
            continue
        if shown < MAX_EXTRAS:
            emit("extra", p=os.path.relpath(full, site)[:MAX_FIELD], **file_facts(tree, full, "sha256")[0])
        shown += 1
    emit("end", tops=sorted(tops), extras=shown, shared=len(shared), pyc_ignored=pyc_ignored)
    return 0


def header(metadata: str, name: str) -> str:
    for line in metadata.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()[:200]
    return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], normalise(sys.argv[2]), *sys.argv[3:4]))
