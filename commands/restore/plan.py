"""Restore, step one: what a restore would change, read from the host, changing nothing.

A source (``commands.restore.source``) is a backup from the inventory or a snapshot proofbot made
earlier (for ``--undo``); either way the live paths come only from the inventory.

Two round trips. The first reads only *where* things are, never content: each live file's
type and, for a symlink, its resolved target; each backup entry resolved on the host; the
owner and mode of every dir (and parent) a restore would write into, one ``stat`` each. A
plan that would read outside its backup dir (an entry that is a symlink to a root-only
file) or write into a dir another user can write is refused there, before the second
round trip reads hashes and diffs that are posted to Slack and kept in the audit log
(the first round trip's script and judgement: ``commands.restore.where``). Each file's reads are one
named fact of the batch runner, so its state and its evidence come from its own commands, never a neighbour's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar, Literal

from commands.checks.check import Reads
from commands.checks.container_files import in_container
from commands.checks.extra_files import extra_files_finding
from commands.checks.file_times import FILE_TIMES, FileTimes, parse_listing
from commands.checks.files import file_hash_argv, hashes_by_path
from commands.command_result import CommandResult
from commands.errors import PlanVoid, Refused
from commands.findings import Evidence, Finding, trim
from commands.inventory import Host
from commands.plans import Plan
from commands.redact import redact, redact_data
from commands.restore.diff import diff_argv, diff_text
from commands.restore.into_container import InsideRead, container_source, read_inside
from commands.restore.source import RestoreSource, backup_source, check_snapshot_path, snapshot_backup
from commands.restore.where import Where, parse_where, refusals, ssh_ids, where_argv
from commands.ssh import HostConnection
from commands.verify.runner import read_facts
from commands.vocabulary import CheckStatus, Operation

_FIND_COMPLAINTS = re.compile(r"\A(?:find: [^\n]*\n)+")
FileChangeState = Literal["differs", "missing", "same", "unreadable"]


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
    inside: bool = False  # a file of the container's own layer (into_container): read and written by the probe
    # The `sha256sum` of this file's source and live path that gave `state`: its own, never
    # another file's. Shown, not stored with the plan (a rebuilt plan has none).
    evidence: Evidence | None = field(default=None, compare=False)

    @property
    def write_path(self) -> str:
        """The path a restore replaces: a symlinked live file's target, so the link is kept."""
        return self.live_target or self.live_path

    def finding(self, blocked: bool) -> Finding:
        """``file:<name>`` when the plan is not applied (nothing differs, or ``blocked`` by an unreadable
        source), with the evidence of the command that read this file."""
        check = f"file:{self.name}"
        details = {"backup_sha256": self.source_sha, "live_sha256": self.live_sha}
        if self.state == "same":
            return Finding(check, CheckStatus.PASS, "identical: nothing to restore", self.evidence, details)
        if self.state == "unreadable":
            return Finding(check, CheckStatus.ERROR, f"cannot plan: {self.problem}", self.evidence, details)
        what = "live file missing" if self.state == "missing" else "differs from the source"
        why = "another file of the plan cannot be read" if blocked else "not applied"
        return Finding(check, CheckStatus.FAIL, f"{what}: not restored ({why})", self.evidence, details)


@dataclass(frozen=True)
class RestorePlan(Plan):
    """Which files a restore would replace, from which source, with the hashes it was built on."""

    operation: ClassVar[Operation] = Operation.RESTORE
    operation_id: str
    host: Host
    source: RestoreSource
    files: list[FileState]
    extras: list[str]

    @property
    def changes(self) -> list[FileState]:
        return [f for f in self.files if f.state in ("differs", "missing")]

    @property
    def unreadable(self) -> list[FileState]:
        return [f for f in self.files if f.state == "unreadable"]

    def unapplied_findings(self) -> list[Finding]:
        """One ``file:<name>`` per file for a plan with nothing to apply (or that cannot be applied),
        each carrying the evidence of its own file's read (the CLI and Slack show these)."""
        return [f.finding(blocked=bool(self.unreadable)) for f in self.files]

    @property
    def plan_hash(self) -> str:
        """What approval binds to: the host, the source and every hash the plan was built on."""
        content = {"host": self.host.name, "source": self.source.backup.dir, "kind": self.source.kind,
                   "files": [[f.name, f.live_path, f.live_sha, f.source_sha]
                             + ([f.live_target] if f.live_target else []) + (["inside"] if f.inside else [])
                             for f in self.files],
                   "extras": self.extras}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        data = {"operation_id": self.operation_id, "host": self.host.name, "source": self.source.label,
                "source_dir": self.source.backup.dir, "plan_hash": self.plan_hash,
                "source_spec": {"kind": self.source.kind, "name": self.source.name, "dir": self.source.backup.dir,
                                "files": dict(self.source.backup.files)},
                "files": [{k: v for k, v in asdict(f).items() if k not in ("diff", "evidence")}
                          | {"diff": trim(f.diff, 4000)} for f in self.files],
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
            source = RestoreSource("snapshot", os.path.basename(path), snapshot_backup(host, path, files),
                                   os.path.dirname(path))
        fields = set(FileState.__dataclass_fields__) - {"evidence"}
        files_state = [FileState(**{k: v for k, v in entry.items() if k in fields}) for entry in details["files"]]
        return cls(details["operation_id"], host, source, files_state, list(details["extras"]))


@dataclass(frozen=True)
class _FileReads:
    """The three reads of one backup file (hash, stat, diff), run as one named fact: each result comes back
    under this file's name, never by its place in the batch."""

    name: str
    live: str
    src: str
    where: Where

    @property
    def fact(self) -> Reads:
        stat = ["find", "-H", self.src, self.live, "-maxdepth", "0", "-printf", "%s\\t%T@\\t%m\\t%u:%g\\t%p\\0"]
        # Never through a link swapped in since the first round trip: diff reads what was checked.
        read = self.where.live_target if self.where.live_type == "symlink" else self.live
        return Reads(f"read:{self.name}", (file_hash_argv(self.src, self.live), stat,
                                           diff_argv(self.live, self.src, read=read)))


async def read_plan(conn: HostConnection, operation_id: str, source: RestoreSource) -> RestorePlan:
    """Where everything leads (refusing what must not be read or written), then one round trip for
    hashes, sizes, modes, owners and diffs of every file, plus the watch dirs.

    Building the plan (decoding, redacting diffs of up to ``DIFF_LIMIT`` bytes) is CPU work:
    it runs in a worker thread so the event loop keeps answering Slack meanwhile.
    """
    service, inside = conn.host.service, frozenset[str]()
    if service is not None and in_container(service):  # live paths mapped to their mounts' host paths, or refused
        source, inside = await container_source(conn, source, service)
    backup = source.backup
    # A file inside the container is not a host path: only its backup copy's side is judged here (the probe
    # reads the live side without following a link).
    where = [Reads(f"where:{name}", (where_argv(backup.backup_path(name) if name in inside else live,
                                                backup.backup_path(name), backup.dir),))
             for name, live in backup.files.items()]
    located = await read_facts(conn, [Reads("id", (["id"],)), *where])
    ids = ssh_ids(located["id"][0])
    wheres = {name: parse_where(located[f"where:{name}"][0]) for name in backup.files}
    reasons = [reason for name, live in backup.files.items()
               for reason in refusals(name, live, backup.backup_path(name), backup.dir, wheres[name], ids,
                                      backup.allow_untrusted_dirs)]
    if reasons:
        raise Refused(f"restore of {conn.host.name} from {source.label} refused, nothing read or written: "
                      + "; ".join(reasons), hint="fix the host or the inventory, then plan again")
    reads = [_FileReads(name, live, backup.backup_path(name), wheres[name]) for name, live in backup.files.items()
             if name not in inside]
    listing = [FileTimes.of_backup(backup)] if backup.watch else []
    results = await read_facts(conn, [*(r.fact for r in reads), *listing])
    plan = await asyncio.to_thread(_build_plan, conn.host, operation_id, source, reads, results)
    if inside and service is not None:
        read = await read_inside(conn, service, {name: (backup.backup_path(name), backup.files[name])
                                                 for name in backup.files if name in inside})
        plan = replace(plan, files=[*plan.files, *(_inside_state(name, backup.files[name], backup.backup_path(name),
                                                                 got) for name, got in read.items())])
    return plan


def _inside_state(name: str, live: str, src: str, read: InsideRead) -> FileState:
    """A file of the container's own layer, as the probe read it (``inside``: every later step goes through it)."""
    record = read.live
    diff = redact(str(record.get("diff", ""))) if read.state == "differs" else ""
    size = record.get("size")
    mtime = record.get("mtime")
    return FileState(name, live, src, read.state, read.live_sha, read.source_sha,  # type: ignore[arg-type]
                     live_size=size if isinstance(size, int) else None,
                     live_mtime=float(mtime) if isinstance(mtime, (int, float)) else None,
                     live_mode=str(record.get("mode")) if record.get("mode") else None,
                     live_owner=str(record.get("owner")) if record.get("owner") else None,
                     source_size=read.source_size, diff=diff, diff_bytes=len(diff.encode()) if diff else None,
                     live_type="missing" if read.state == "missing" else "file", evidence=read.evidence, inside=True)


def _build_plan(host: Host, operation_id: str, source: RestoreSource, reads: list[_FileReads],
                results: dict[str, tuple[CommandResult, ...]]) -> RestorePlan:
    files: list[FileState] = []
    for reads_of in reads:
        hashed, stat, diff = results[reads_of.fact.name]
        state = _file_state(reads_of.name, reads_of.live, reads_of.src, hashed, stat, diff)
        where = reads_of.where
        target = where.live_target if where.live_type == "symlink" else None
        evidence = Evidence.of(hashed.command, hashed.exit_status, hashed.text, hashed.duration_s)
        files.append(replace(state, live_type=where.live_type, live_target=target, evidence=evidence))
    extras: list[str] = []
    if FILE_TIMES in results:
        finding = extra_files_finding(source.name, source.backup, parse_listing(results[FILE_TIMES][0]))
        extras = list(finding.details.get("extra_files", []))
    return RestorePlan(operation_id, host, source, files, extras)


def _file_state(name: str, live: str, src: str, hashed: CommandResult, stat: CommandResult,
                diff: CommandResult) -> FileState:
    hashes = hashes_by_path(hashed.text)
    stats: dict[str, list[str]] = {}
    for record in stat.text.split("\0"):
        # find's complaint about a path (stderr shares the stream) comes before the next record, unended
        parts = _FIND_COMPLAINTS.sub("", record).split("\t", 4)
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
