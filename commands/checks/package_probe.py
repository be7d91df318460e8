"""Runs ON THE HOST, under the interpreter being checked: ``<python> -I -S -c <this source> DIST``.

It is never imported by proofbot: ``commands.checks.package`` reads this file's text and
sends it as one argv element. It finds DIST's ``.dist-info`` in that interpreter's
site-packages, hashes every file RECORD lists and lists the files in the package's own
top-level directories that RECORD does not. It prints one JSON object per line (names,
sizes and digests, never file contents); ``commands.checks.package`` gives the verdict.

Written for the oldest Python a host may run (3.8): no ``match``, no ``removeprefix``.
``-S`` so that no ``.pth`` file of the checked environment runs before the probe does.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import re
import site
import stat
import sys

MAX_ROWS = 200000
MAX_EXTRAS = 200
MAX_FIELD = 4096
CHUNK = 1 << 20
ALGORITHMS = ("sha256", "sha384", "sha512", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s")


def emit(kind: str, **fields: object) -> None:
    fields["t"] = kind
    # ensure_ascii: a name with a newline or odd bytes stays on one line, so framing holds.
    sys.stdout.write(json.dumps(fields, ensure_ascii=True, sort_keys=True) + "\n")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_dirs() -> tuple[str, list[str]]:
    """The environment's prefix and site-packages dirs, found as ``site`` would, without running it.

    ``site.venv()`` is what makes a venv's prefix the venv (``-S`` skips it), and it also
    runs the venv's ``.pth`` files, so its lookup of ``pyvenv.cfg`` is repeated here.
    """
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    prefixes = [sys.prefix, sys.exec_prefix]
    for cfg in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(os.path.dirname(exe_dir), "pyvenv.cfg")):
        if os.path.isfile(cfg):
            prefixes = [os.path.dirname(exe_dir)]
            # As site.venv() does; Debian's getsitepackages() only gives a venv's site-packages
            # when sys.prefix differs from sys.base_prefix.
            sys.prefix = sys.exec_prefix = prefixes[0]
            if _config_value(cfg, "include-system-site-packages") == "true":
                prefixes += [sys.base_prefix, sys.base_exec_prefix]
            break
    found: list[str] = []
    for path in map(os.path.normpath, site.getsitepackages(prefixes)):
        if os.path.isdir(path) and path not in found:
            found.append(path)
    return os.path.normpath(prefixes[0]), found


def _config_value(path: str, wanted: str) -> str:
    try:
        with open(path, encoding="utf-8") as cfg:
            for line in cfg:
                key, _, value = line.partition("=")
                if key.strip().lower() == wanted:
                    return value.strip().lower()
    except OSError:
        pass
    return ""


def find_dist_infos(dirs: list[str], dist: str) -> list[tuple[str, str]]:
    matches: list[tuple[str, str]] = []
    for directory in dirs:
        for entry in sorted(os.listdir(directory)):
            for suffix in (".dist-info", ".egg-info"):
                if entry.endswith(suffix) and normalise(entry[: -len(suffix)].split("-")[0]) == dist:
                    matches.append((directory, entry))
    return matches


def read_small(path: str, limit: int = 65536) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return None


def header(metadata: str, name: str) -> str:
    for line in metadata.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()[:200]
    return ""


def digest(path: str, algorithm: str) -> tuple[int, str, bool]:
    """Size, urlsafe-base64 digest (no padding, as RECORD writes it) and whether it starts with #!."""
    hasher = hashlib.new(algorithm)
    size = 0
    with open(path, "rb") as handle:
        first = handle.read(CHUNK)
        shebang = first.startswith(b"#!")
        chunk = first
        while chunk:
            hasher.update(chunk)
            size += len(chunk)
            chunk = handle.read(CHUNK)
    return size, base64.urlsafe_b64encode(hasher.digest()).decode().rstrip("="), shebang


def file_facts(path: str, algorithm: str) -> dict[str, object]:
    """What is at path, without following a symlink."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {"st": "missing"}
    except OSError as exc:
        return {"st": "unreadable", "err": exc.strerror or str(exc)}
    if stat.S_ISLNK(info.st_mode):
        return {"st": "link", "target": os.readlink(path)[:MAX_FIELD]}
    if not stat.S_ISREG(info.st_mode):
        return {"st": "other"}
    try:
        size, value, shebang = digest(path, algorithm)
    except OSError as exc:
        return {"st": "unreadable", "err": exc.strerror or str(exc)}
    facts: dict[str, object] = {"st": "ok", "size": size, "a": algorithm, "d": value}
    if shebang:
        facts["sb"] = True
    return facts


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_record(prefix: str, site_dir: str, dist_info: str) -> tuple[set[str], set[str]] | None:
    """Emit one row per RECORD line; return the paths listed and the package's top-level dirs.

    A row resolving outside the environment's prefix is not read: a hostile RECORD could
    otherwise make the probe print the digest of any file root can read.
    """
    listed: set[str] = set()
    tops: set[str] = set()
    try:
        with open(os.path.join(site_dir, dist_info, "RECORD"), encoding="utf-8", newline="") as record:
            for number, row in enumerate(csv.reader(record)):
                if number >= MAX_ROWS:
                    emit("cut", rows=number)
                    break
                if len(row) != 3:
                    emit("bad", n=number, fields=len(row), p=row[0][:MAX_FIELD] if row else "")
                    continue
                path, recorded, size = row
                full = os.path.normpath(os.path.join(site_dir, path))
                listed.add(full)
                parts = os.path.relpath(full, site_dir).split(os.sep)
                if len(parts) > 1 and parts[0] not in ("..", dist_info, "__pycache__") \
                        and not parts[0].endswith(".data"):
                    tops.add(parts[0])
                algorithm = recorded.partition("=")[0]
                algorithm = algorithm if algorithm in ALGORITHMS else "sha256"
                facts = file_facts(full, algorithm) if inside(full, prefix) else {"st": "outside"}
                emit("row", n=number, p=path[:MAX_FIELD], h=recorded[:200], s=size[:40], **facts)
    except FileNotFoundError:
        emit("error", reason="no-record", dist_info=os.path.join(site_dir, dist_info))
        return None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        emit("error", reason="record-unreadable", detail=str(exc)[:300])
        return None
    return listed, tops


def unlisted_files(site_dir: str, tops: set[str], listed: set[str]) -> tuple[list[str], int]:
    """Files (and symlinks) in the package's top-level dirs that RECORD does not list; .pyc in __pycache__ counted."""
    extras: list[str] = []
    pyc_ignored = 0
    for top in sorted(tops):
        root = os.path.join(site_dir, top)
        if os.path.islink(root) or not os.path.isdir(root):
            if os.path.islink(root):
                extras.append(root)
            continue
        for current, dirs, files in os.walk(root):
            for name in dirs:
                if os.path.islink(os.path.join(current, name)):
                    extras.append(os.path.join(current, name))
            for name in files:
                full = os.path.join(current, name)
                if full in listed:
                    continue
                if os.path.basename(current) == "__pycache__" and name.endswith(".pyc"):
                    pyc_ignored += 1
                    continue
                extras.append(full)
    return extras, pyc_ignored


def claimed_by_others(site_dir: str, own: str, candidates: list[str]) -> set[str]:
    """Which candidates another dist's RECORD lists: namespace dirs (nvidia/, google/) are shared."""
    wanted = set(candidates)
    claimed: set[str] = set()
    for entry in os.listdir(site_dir):
        if entry == own or not entry.endswith(".dist-info"):
            continue
        try:
            with open(os.path.join(site_dir, entry, "RECORD"), encoding="utf-8", newline="") as record:
                for row in csv.reader(record):
                    if row:
                        full = os.path.normpath(os.path.join(site_dir, row[0]))
                        if full in wanted:
                            claimed.add(full)
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
    return claimed


def main(dist: str) -> int:
    prefix, dirs = site_dirs()
    emit("env", python=sys.executable, version=sys.version.split()[0], prefix=prefix, site=dirs)
    found = find_dist_infos(dirs, dist)
    if not found:
        emit("error", reason="not-installed", dist=dist)
        return 3
    site_dir, dist_info = found[0]
    if dist_info.endswith(".egg-info"):
        emit("error", reason="egg-info", dist_info=os.path.join(site_dir, dist_info))
        return 3
    base = os.path.join(site_dir, dist_info)
    metadata = read_small(os.path.join(base, "METADATA")) or ""
    direct_url = read_small(os.path.join(base, "direct_url.json"))
    editable, url = False, ""
    if direct_url:
        try:
            parsed = json.loads(direct_url)
            editable = bool((parsed.get("dir_info") or {}).get("editable"))
            url = str(parsed.get("url", ""))[:MAX_FIELD]
        except (ValueError, AttributeError):
            pass
    emit("dist", name=header(metadata, "Name"), version=header(metadata, "Version"),
         installer=(read_small(os.path.join(base, "INSTALLER"), 100) or "").strip(),
         site=site_dir, dist_info=dist_info, editable=editable, url=url,
         others=[os.path.join(d, e) for d, e in found[1:]])
    checked = check_record(prefix, site_dir, dist_info)
    if checked is None:
        return 4
    listed, tops = checked
    extras, pyc_ignored = unlisted_files(site_dir, tops, listed)
    shared = claimed_by_others(site_dir, dist_info, extras) if extras else set()
    shown = 0
    for full in extras:
        if full in shared:
            continue
        if shown < MAX_EXTRAS:
            algorithm = "sha256"
            emit("extra", p=os.path.relpath(full, site_dir)[:MAX_FIELD], **file_facts(full, algorithm))
        shown += 1
    emit("end", tops=sorted(tops), extras=shown, shared=len(shared), pyc_ignored=pyc_ignored)
    return 0


if __name__ == "__main__":
    sys.exit(main(normalise(sys.argv[1])))
