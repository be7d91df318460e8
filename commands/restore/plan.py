"""Restore, step one: what a restore would change, read from the host, changing nothing.

A source is a backup from the inventory or a snapshot proofbot made earlier (for
``--undo``); either way the live paths come only from the inventory.

Two round trips. The first reads only *where* things are, never content: each live file's
type and, for a symlink, its resolved target; each backup entry resolved on the host; the
owner and mode of every dir (and parent) a restore would write into, one ``stat`` each. A
plan that would read outside its backup dir (an entry that is a symlink to a root-only
file) or write into a dir another user can write is refused there, before the second
round trip reads hashes and diffs that are posted to Slack and kept in the audit log.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar, Literal

from commands.checks.files import file_hash_argv, hashes_by_path
from commands.checks.listing import extra_files_finding, listing_argv, listing_paths, parse_listing
from commands.command_result import CommandResult
from commands.errors import PlanVoid, Refused, UnknownBackup, UsageError
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
# the diff goes through dd, which passes exactly $4 bytes; wc then drains the rest (so diff
# never dies of SIGPIPE) and prints only its byte count, right after those $4 bytes.
DIFF_SCRIPT = ('{ st=$( { { diff -u --no-dereference --label "$1" --label "$3" -- "$2" "$3"; '
               'echo "$?" >&3; } | { dd bs="$4" count=1 iflag=fullblock 2>/dev/null; rest=$(wc -c); '
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
    live_type: str | None = None  # file | symlink | missing
    live_target: str | None = None  # a symlink's resolved target: what a restore writes

    @property
    def write_path(self) -> str:
        """The path a restore replaces: a symlinked live file's target, so the link is kept."""
        return self.live_target or self.live_path


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
                   "files": [[f.name, f.live_path, f.live_sha, f.source_sha]
                             + ([f.live_target] if f.live_target else []) for f in self.files],
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
            source = RestoreSource("snapshot", os.path.basename(path), _snapshot_backup(host, path, files),
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
    return RestoreSource("snapshot", os.path.basename(path), _snapshot_backup(host, path, entries), root)


def _snapshot_backup(host: Host, path: str, files: dict[str, str]) -> Backup:
    """A snapshot restores into the dirs of the backup it belongs to, under that backup's trust rule."""
    owner = host.backups[snapshot_roots(host)[os.path.dirname(path)]]
    return Backup(dir=path, files=files, allow_untrusted_dirs=owner.allow_untrusted_dirs)


# Run as `sh -c WHERE proofbot-where LIVE SOURCE SOURCE_DIR`: where each path leads, and the
# owner/mode of every dir a restore writes into (the live file's dir, its resolved dir, the
# target's dir for a symlink, and each of their parents), without reading any content.
WHERE_SCRIPT = r"""live=$1 src=$2 srcdir=$3
kind() { if [ -L "$1" ]; then echo symlink; elif [ -f "$1" ]; then echo file; elif [ -e "$1" ]; then echo other
  else echo missing; fi; }
follow() { if [ -f "$1" ]; then echo file; elif [ -e "$1" ]; then echo other; else echo missing; fi; }
target=$(readlink -f -- "$live")
printf 'live\t%s\t%s\t%s\0' "$(kind "$live")" "$(follow "$live")" "$target"
printf 'source\t%s\t%s\0' "$(follow "$src")" "$(realpath -e -- "$src" 2>/dev/null)"
printf 'source-dir\t%s\0' "$(realpath -e -- "$srcdir" 2>/dev/null)"
for d in "$(dirname -- "$live")" ${target:+"$(dirname -- "$target")"}; do
  while :; do
    stat --printf 'dir\t%u\t%g\t%a\t%F\t%n\0' -- "$d"
    case $d in /|.|'') break;; esac
    d=$(dirname -- "$d")
  done
done"""


def where_argv(live: str, source: str, source_dir: str) -> list[str]:
    return ["sh", "-c", WHERE_SCRIPT, "proofbot-where", live, source, source_dir]


@dataclass(frozen=True)
class Where:
    """Where one backup file's paths lead on the host, and who can write the dirs on the way."""

    live_type: str
    live_follows: str
    live_target: str
    source_follows: str
    source_real: str
    source_dir_real: str
    dirs: dict[str, tuple[int, int, int, str]]  # path -> (uid, gid, mode, type)


def parse_where(result: CommandResult) -> Where:
    """The NUL-ended records of WHERE_SCRIPT; a record missing leaves its fields empty (refused)."""
    fields: dict[str, list[str]] = {}
    dirs: dict[str, tuple[int, int, int, str]] = {}
    for record in result.text.split("\0"):
        record = "\n".join(line for line in record.split("\n") if not line.startswith("stat: "))
        kind, _, rest = record.partition("\t")
        parts = rest.split("\t", 4)
        if kind == "dir" and len(parts) == 5 and parts[0].isdigit() and parts[1].isdigit():
            dirs[parts[4]] = (int(parts[0]), int(parts[1]), int(parts[2] or "0", 8), parts[3])
        elif kind in ("live", "source", "source-dir"):
            fields[kind] = rest.split("\t", {"live": 2, "source": 1, "source-dir": 0}[kind])
    live = [*fields.get("live", []), "", "", ""]
    source = [*fields.get("source", []), "", ""]
    return Where(live[0], live[1], live[2], source[0], source[1], [*fields.get("source-dir", []), ""][0], dirs)


def _ssh_ids(result: CommandResult) -> tuple[int, int] | None:
    match = re.search(r"uid=([0-9]+)\S* gid=([0-9]+)", result.text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def untrusted_dirs(where: Where, ids: tuple[int, int], live: str) -> list[str]:
    """Dirs on the way that a user other than root and the SSH user can write, each with who.

    A sticky parent (``/tmp``) is fine: nobody can rename or remove another user's entry in
    it, and the entry below is judged in turn. The dir written into may not be sticky either:
    other users could still create names in it.
    """
    uid, gid = ids
    written = {os.path.dirname(live), os.path.dirname(where.live_target)} - {""}
    found = []
    for path, (owner, group, mode, ftype) in where.dirs.items():
        if ftype != "directory":
            continue  # a symlinked parent: its own dir and its target's are both in the list
        if mode & 0o1000 and path not in written:
            continue
        who = []
        if mode & 0o200 and owner not in (0, uid):
            who.append(f"owner uid {owner}")
        if mode & 0o020 and group not in (0, gid):
            who.append(f"group gid {group}")
        if mode & 0o002:
            who.append("every user" + (" (sticky)" if mode & 0o1000 else ""))
        if who:
            found.append(f"{path} (mode {mode:o}, writable by {' and '.join(who)})")
    return found


def refusals(name: str, live: str, src: str, source_dir: str, where: Where, ids: tuple[int, int] | None,
             allow_untrusted: bool) -> list[str]:
    """Why a restore of this file must not even be planned; empty when it may."""
    reasons: list[str] = []
    if not where.live_type or not where.source_follows:
        return [f"could not read where {live} and {src} lead"]
    if where.source_follows == "other":
        reasons.append(f"{src} is not a regular file: not read")
    elif where.source_real and not (where.source_dir_real
                                    and where.source_real.startswith(where.source_dir_real.rstrip("/") + "/")):
        reasons.append(f"backup entry {name} leads outside the backup dir {source_dir} "
                       f"(to {where.source_real}): not read")
    if where.live_type == "other" or where.live_follows == "other":
        reasons.append(f"live {live} is not a regular file")
    elif where.live_type == "symlink" and where.live_follows == "missing":
        reasons.append(f"live {live} is a symlink to nothing ({where.live_target or 'unresolvable'})")
    if ids is None:
        reasons.append("could not read the SSH user's uid and gid (`id`) to judge who can write the live dirs")
        return reasons
    untrusted = untrusted_dirs(where, ids, live)
    if where.live_type == "symlink" and untrusted:
        # Whoever can repoint the link chooses what a restore writes and what the plan diffs:
        # refused even where allow_untrusted_dirs accepts other users writing the files.
        reasons.append(f"live {live} is a symlink in a dir other users can write: {'; '.join(untrusted)}")
    elif untrusted and not allow_untrusted:
        reasons.append(f"{live} would be written in a dir other users can write: {'; '.join(untrusted)} "
                       "(set allow_untrusted_dirs: true on this backup to accept that)")
    return reasons


def _plan_commands(source: RestoreSource, wheres: list[Where]) -> list[list[str]]:
    backup = source.backup
    commands: list[list[str]] = []
    for (name, live), where in zip(backup.files.items(), wheres, strict=True):
        src = backup.backup_path(name)
        read = where.live_target if where.live_type == "symlink" else live
        commands.append(file_hash_argv(src, live))
        commands.append(["find", "-H", src, live, "-maxdepth", "0", "-printf", "%s\\t%T@\\t%m\\t%u:%g\\t%p\\0"])
        # Never through a link swapped in since the first round trip: diff reads what was checked.
        commands.append(diff_argv(live, src, read=read))
    if backup.watch:
        commands.append(listing_argv(listing_paths(backup)))
    return commands


def diff_argv(live: str, src: str, limit: int = DIFF_LIMIT, *, read: str | None = None) -> list[str]:
    """``diff -u live src`` (reading ``read`` for live, labelled ``live``) cut on the host at ``limit``
    bytes, keeping diff's exit status."""
    return ["sh", "-c", DIFF_SCRIPT, "sh", live, read or live, src, str(limit)]


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
    """Where everything leads (refusing what must not be read or written), then one round trip for
    hashes, sizes, modes, owners and diffs of every file, plus the watch dirs.

    Building the plan (decoding, redacting diffs of up to ``DIFF_LIMIT`` bytes) is CPU work:
    it runs in a worker thread so the event loop keeps answering Slack meanwhile.
    """
    backup = source.backup
    located = await conn.run_batch([["id"], *(where_argv(live, backup.backup_path(name), backup.dir)
                                             for name, live in backup.files.items())])
    ids = _ssh_ids(located[0])
    wheres = [parse_where(r) for r in located[1:]]
    reasons = [reason for (name, live), where in zip(backup.files.items(), wheres, strict=True)
               for reason in refusals(name, live, backup.backup_path(name), backup.dir, where, ids,
                                      backup.allow_untrusted_dirs)]
    if reasons:
        raise Refused(f"restore of {conn.host.name} from {source.label} refused, nothing read or written: "
                      + "; ".join(reasons), hint="fix the host or the inventory, then plan again")
    results = await conn.run_batch(_plan_commands(source, wheres))
    return await asyncio.to_thread(_build_plan, conn.host, operation_id, source, wheres, located, results)


def _build_plan(host: Host, operation_id: str, source: RestoreSource, wheres: list[Where],
                located: list[CommandResult], results: list[CommandResult]) -> RestorePlan:
    backup = source.backup
    files: list[FileState] = []
    for index, ((name, live), where) in enumerate(zip(backup.files.items(), wheres, strict=True)):
        hashed, stat, diff = results[3 * index: 3 * index + 3]
        state = _file_state(name, live, backup.backup_path(name), hashed, stat, diff)
        target = where.live_target if where.live_type == "symlink" else None
        files.append(replace(state, live_type=where.live_type, live_target=target))
    extras: list[str] = []
    evidence = [Evidence.of(r.command, r.exit_status, r.text, r.duration_s) for r in [*located, *results]]
    if backup.watch:
        finding = extra_files_finding(source.name, backup, parse_listing(results[-1]))
        extras = list(finding.details.get("extra_files", []))
    return RestorePlan(operation_id, host, source, files, extras, evidence)


def _file_state(name: str, live: str, src: str, hashed: CommandResult, stat: CommandResult,
                diff: CommandResult) -> FileState:
    hashes = hashes_by_path(hashed.text)
    stats: dict[str, list[str]] = {}
    for record in stat.text.split("\0"):
        parts = record.split("\t", 4)
        if len(parts) == 5:
            stats[parts[4]] = parts[:4]
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
