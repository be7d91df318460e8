"""Restore, step one: what a restore would change, read from the host, changing nothing.

A source is a backup from the inventory or a snapshot proofbot made earlier (for
``--undo``); either way the live paths come only from the inventory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from commands.checks.files import file_hash_argv, hashes_by_path
from commands.checks.listing import extra_files_finding, listing_argv, listing_paths, parse_listing
from commands.command_result import CommandResult
from commands.errors import PlanVoid, UnknownBackup, UsageError
from commands.findings import Evidence, trim
from commands.inventory import Backup, Host
from commands.plans import Plan
from commands.redact import redact, redact_data
from commands.ssh import HostConnection

SNAPSHOT_SUFFIX = ".proofbot-snapshots"
SNAPSHOT_NAME = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[A-Za-z0-9-]{1,64}$")
MANIFEST = "MANIFEST.json"
DIFF_LIMIT = 200_000  # bytes of diff the host sends; the rest is only counted there
# diff's own exit status survives the pipe (sh has no pipefail): it leaves through fd 3 while
# the diff goes through dd, which passes exactly $3 bytes; wc then drains the rest (so diff
# never dies of SIGPIPE) and prints only its byte count, right after those $3 bytes.
DIFF_SCRIPT = ('{ st=$( { { diff -u --label "$1" --label "$2" -- "$1" "$2"; echo "$?" >&3; } '
               '| { dd bs="$3" count=1 iflag=fullblock 2>/dev/null; rest=$(wc -c); '
               '[ "$rest" -eq 0 ] || printf %s "$rest"; } >&4; } 3>&1 ); } 4>&1; exit "$st"')
FileChangeState = Literal["differs", "missing", "same", "unreadable"]


@dataclass(frozen=True)
class RestoreSource:
    kind: Literal["backup", "snapshot"]
    name: str
    backup: Backup
    snapshot_root: str

    @property
    def label(self) -> str:
        return f"backup {self.name}" if self.kind == "backup" else f"snapshot {self.backup.dir}"


@dataclass(frozen=True)
class FileState:
    name: str
    live_path: str
    source_path: str
    state: FileChangeState
    live_sha: str | None
    source_sha: str | None
    live_size: int | None = None
    live_mtime: float | None = None
    live_mode: str | None = None
    live_owner: str | None = None
    source_size: int | None = None
    diff: str = ""
    problem: str = ""
    diff_bytes: int | None = None  # the whole diff's size as counted on the host


@dataclass(frozen=True)
class RestorePlan(Plan):
    """Which files a restore would replace, from which source, with the hashes it was built on."""

    operation: ClassVar[str] = "restore"
    operation_id: str
    host: Host
    source: RestoreSource
    files: list[FileState]
    extras: list[str]
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def changes(self) -> list[FileState]:
        return [f for f in self.files if f.state in ("differs", "missing")]

    @property
    def unreadable(self) -> list[FileState]:
        return [f for f in self.files if f.state == "unreadable"]

    @property
    def plan_hash(self) -> str:
        """What approval binds to: the host, the source and every hash the plan was built on."""
        content = {"host": self.host.name, "source": self.source.backup.dir, "kind": self.source.kind,
                   "files": [[f.name, f.live_path, f.live_sha, f.source_sha] for f in self.files],
                   "extras": self.extras}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        data = {"operation_id": self.operation_id, "host": self.host.name, "source": self.source.label,
                "source_dir": self.source.backup.dir, "plan_hash": self.plan_hash,
                "source_spec": {"kind": self.source.kind, "name": self.source.name, "dir": self.source.backup.dir,
                                "files": dict(self.source.backup.files)},
                "files": [{k: v for k, v in asdict(f).items() if k != "diff"} | {"diff": trim(f.diff, 4000)}
                          for f in self.files],
                "extras": self.extras}
        return redact_data(data)

    @classmethod
    def rebuild(cls, details: dict[str, Any], host: Host) -> RestorePlan:
        """Its source is re-derived from the inventory, never trusted as stored."""
        source_info = details["source_spec"]
        if source_info["kind"] == "backup":
            source = backup_source(host, source_info["name"])
            if source.backup.dir != source_info["dir"]:
                raise PlanVoid(f"plan void: backup {source_info['name']} of {host.name} moved in the inventory "
                               "since the plan", hint="request a new plan")
        else:
            path = check_snapshot_path(host, source_info["dir"])
            allowed = {live for backup in host.backups.values() for live in backup.files.values()}
            files = {str(k): str(v) for k, v in source_info["files"].items() if v in allowed}
            source = RestoreSource("snapshot", os.path.basename(path), Backup(dir=path, files=files),
                                   os.path.dirname(path))
        fields = set(FileState.__dataclass_fields__)
        files_state = [FileState(**{k: v for k, v in entry.items() if k in fields}) for entry in details["files"]]
        return cls(details["operation_id"], host, source, files_state, list(details["extras"]))


def backup_source(host: Host, backup_name: str | None) -> RestoreSource:
    name, backup = host.backup(backup_name)
    return RestoreSource("backup", name, backup, backup.dir + SNAPSHOT_SUFFIX)


def snapshot_roots(host: Host) -> dict[str, str]:
    return {backup.dir + SNAPSHOT_SUFFIX: name for name, backup in host.backups.items()}


def check_snapshot_path(host: Host, snapshot_dir: str) -> str:
    """A snapshot dir typed by a person must be one proofbot made for this host's backups."""
    path = os.path.normpath(snapshot_dir)
    root, child = os.path.dirname(path), os.path.basename(path)
    if root not in snapshot_roots(host) or not SNAPSHOT_NAME.fullmatch(child):
        known = ", ".join(sorted(snapshot_roots(host))) or "none"
        raise UsageError(f"{snapshot_dir!r} is not a proofbot snapshot of {host.name}",
                         hint=f"snapshots live in: {known}")
    return path


async def snapshot_source(conn: HostConnection, snapshot_dir: str) -> RestoreSource:
    """Read a snapshot's manifest; its files must still be backup files of this host."""
    host = conn.host
    path = check_snapshot_path(host, snapshot_dir)
    result = await conn.run(["cat", "--", f"{path}/{MANIFEST}"])
    if result.exit_status != 0:
        raise UnknownBackup(f"cannot read {path}/{MANIFEST}: {result.text.strip()}")
    try:
        manifest = json.loads(result.text)
        entries = {str(name): str(entry["live_path"]) for name, entry in manifest["files"].items()
                   if not entry.get("absent")}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UnknownBackup(f"{path}/{MANIFEST} is not a proofbot snapshot manifest") from None
    allowed = {live for backup in host.backups.values() for live in backup.files.values()}
    outside = sorted(live for live in entries.values() if live not in allowed)
    if outside:
        raise UsageError(f"snapshot {path} names files that are not backup files of {host.name}: "
                         f"{', '.join(outside)}", hint="proofbot only writes paths listed in the inventory")
    if not entries:
        raise UnknownBackup(f"snapshot {path} holds no files to put back")
    root = os.path.dirname(path)
    return RestoreSource("snapshot", os.path.basename(path), Backup(dir=path, files=entries), root)


def _plan_commands(source: RestoreSource) -> list[list[str]]:
    backup = source.backup
    commands: list[list[str]] = []
    for name, live in backup.files.items():
        src = backup.backup_path(name)
        commands.append(file_hash_argv(src, live))
        commands.append(["find", src, live, "-maxdepth", "0", "-printf", "%p\\t%s\\t%T@\\t%m\\t%u:%g\\n"])
        commands.append(diff_argv(live, src))
    if backup.watch:
        commands.append(listing_argv(listing_paths(backup)))
    return commands


def diff_argv(live: str, src: str, limit: int = DIFF_LIMIT) -> list[str]:
    """``diff -u live src`` cut on the host at ``limit`` bytes, keeping diff's exit status."""
    return ["sh", "-c", DIFF_SCRIPT, "sh", live, src, str(limit)]


def diff_text(result: CommandResult, limit: int = DIFF_LIMIT) -> tuple[str, int]:
    """The diff as shown and its full size: at most ``limit`` bytes came, then the count of the rest.

    The cut falls back to the last whole line, so no secret is shown in part.
    """
    body, rest = result.output[:limit], result.output[limit:]
    if not rest.isdigit():
        return result.output.decode("utf-8", errors="replace"), len(result.output)
    total = limit + int(rest)
    kept = body[: body.rfind(b"\n") + 1] or body
    note = (f"… [diff cut on the host after {len(kept):,} of {total:,} bytes: "
            "compare the hashes above; the rest was not read]\n")
    return kept.decode("utf-8", errors="replace") + note, total


async def read_plan(conn: HostConnection, operation_id: str, source: RestoreSource) -> RestorePlan:
    """One round trip: hashes, sizes, modes, owners and diffs of every file, plus the watch dirs.

    Building the plan (decoding, redacting diffs of up to ``DIFF_LIMIT`` bytes) is CPU work:
    it runs in a worker thread so the event loop keeps answering Slack meanwhile.
    """
    results = await conn.run_batch(_plan_commands(source))
    return await asyncio.to_thread(_build_plan, conn.host, operation_id, source, results)


def _build_plan(host: Host, operation_id: str, source: RestoreSource, results: list[CommandResult]) -> RestorePlan:
    backup = source.backup
    files: list[FileState] = []
    for index, (name, live) in enumerate(backup.files.items()):
        hashed, stat, diff = results[3 * index: 3 * index + 3]
        files.append(_file_state(name, live, backup.backup_path(name), hashed, stat, diff))
    extras: list[str] = []
    evidence = [Evidence.of(r.command, r.exit_status, r.text, r.duration_s) for r in results]
    if backup.watch:
        finding = extra_files_finding(source.name, backup, parse_listing(results[-1]))
        extras = list(finding.details.get("extra_files", []))
    return RestorePlan(operation_id, host, source, files, extras, evidence)


def _file_state(name: str, live: str, src: str, hashed: CommandResult, stat: CommandResult,
                diff: CommandResult) -> FileState:
    hashes = hashes_by_path(hashed.text)
    stats: dict[str, list[str]] = {}
    for line in stat.text.splitlines():
        parts = line.split("\t")
        if len(parts) == 5:
            stats[parts[0]] = parts[1:]
    live_stat, src_stat = stats.get(live), stats.get(src)
    common: dict[str, Any] = {
        "live_size": int(live_stat[0]) if live_stat else None,
        "live_mtime": float(live_stat[1]) if live_stat else None,
        "live_mode": live_stat[2] if live_stat else None,
        "live_owner": live_stat[3] if live_stat else None,
        "source_size": int(src_stat[0]) if src_stat else None,
    }
    live_sha, src_sha = hashes.get(live), hashes.get(src)
    if src_sha is None:
        problem = next((line for line in hashed.text.splitlines() if src in line), "no hash printed")
        return FileState(name, live, src, "unreadable", live_sha, None, problem=problem, **common)
    if live_sha is None:
        if live_stat is None and "No such file" in hashed.text:
            return FileState(name, live, src, "missing", None, src_sha, **common)
        problem = next((line for line in hashed.text.splitlines() if live in line), "no hash printed")
        return FileState(name, live, src, "unreadable", None, src_sha, problem=problem, **common)
    if live_sha == src_sha:
        return FileState(name, live, src, "same", live_sha, src_sha, **common)
    # The diff is shown in Slack and kept in the audit log: cut first (bounded work), then masked.
    shown, total = diff_text(diff)
    return FileState(name, live, src, "differs", live_sha, src_sha, diff=redact(shown), diff_bytes=total, **common)
