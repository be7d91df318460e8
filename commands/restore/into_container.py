"""Restore into a container service, decided before anything is read or written: each live path is looked up in
the container's mounts (``inspect`` ``Mounts``, read on the host). A bind-mounted or volume path is a host path
(its source): restored there as on any host. A path in the container's own layer is refused (a recreate would lose
it) unless the backup says ``into_container: true``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any

from commands.checks.check import Fact, Reads, Script
from commands.checks.container_files import ContainerFileCheck, ContainerFiles, hex_digest, live_record, probe_script
from commands.checks.engine_guard import guarded
from commands.checks.files import hashes_by_path
from commands.checks.package import probe_records
from commands.command_result import CommandResult
from commands.errors import CouldNotCheck, Refused
from commands.findings import Evidence
from commands.inventory import Host, Service
from commands.inventory.containers import Engine
from commands.restore.source import RestoreSource
from commands.ssh import BatchStep, HostConnection, ShellStep
from commands.verify.runner import read_facts

MOUNTS_FORMAT = "{{json .State.Pid}}\n{{json .Mounts}}"
HOST_BACKED = ("bind", "volume")  # their source is a host path that outlives the container


@dataclass(frozen=True)
class Mount:
    kind: str  # bind, volume, tmpfs, npipe
    source: str
    destination: str


@dataclass(frozen=True)
class Placed:
    """Where one live path of the container is: on the host (``host_path``), or in its own layer."""

    live: str
    host_path: str | None
    mount: Mount | None


def mounts_argv(service: Service) -> list[str]:
    engine = service.engine or Engine()
    return guarded([*engine.argv(), "inspect", "--type", "container", "--format", MOUNTS_FORMAT, service.unit])


def parse_mounts(result: CommandResult) -> list[Mount] | None:
    """The container's mounts from ``inspect`` (pure); None when the output holds no mount list."""
    for line in result.text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, list) or (value is None and line.strip() == "null"):
            return [Mount(str(m.get("Type", "")), str(m.get("Source", "")), os.path.normpath(str(m["Destination"])))
                    for m in value or [] if isinstance(m, dict) and m.get("Destination")]
    return None


def place(live: str, mounts: list[Mount]) -> Placed:
    """The mount that holds ``live`` (the deepest whose destination is it or a dir above it), and its host path."""
    path = os.path.normpath(live)
    holding = [m for m in mounts if path == m.destination or path.startswith(m.destination.rstrip("/") + "/")]
    if not holding:
        return Placed(live, None, None)
    mount = max(holding, key=lambda m: len(m.destination))
    if mount.kind not in HOST_BACKED or not mount.source.startswith("/"):
        return Placed(live, None, mount)
    rest = os.path.relpath(path, mount.destination)
    return Placed(live, mount.source if rest == "." else os.path.join(mount.source, rest), mount)


def refusal(name: str, placed: Placed, container: str, backup_name: str, into_container: bool) -> str | None:
    """Why the file must not be restored (None: it may, on the host or, with into_container, inside)."""
    mount = placed.mount
    if mount is not None and mount.kind == "bind" and os.path.normpath(placed.live) == mount.destination:
        # The container holds the mounted inode itself: the host file replaced by rename would go unseen by the
        # service, while a re-read on the host passed. Never report a restore the service cannot see.
        return (f"{name}: {placed.live} is a file bind-mounted by itself into container {container} (from "
                f"{mount.source}): a restore replaces the host file, which the container would not see (it keeps "
                "the old file); restore it by hand and recreate the container, or mount its directory instead")
    if placed.host_path is not None:
        return None
    if placed.mount is not None:
        return (f"{placed.live} is on a {placed.mount.kind} mount of container {container}: nothing on the host "
                "to restore it into")
    if into_container:
        return None
    return (f"{name}: {placed.live} is in container {container}'s own layer: a restore there is lost at the next "
            "recreate; rebuild or re-pull the image (or set into_container: true on backup "
            f"{backup_name} to write it there anyway)")


async def container_source(conn: HostConnection, source: RestoreSource, service: Service
                           ) -> tuple[RestoreSource, frozenset[str]]:
    """The source with each live path on a mount mapped to its host path, and the names of the files written
    inside the container (its own layer, ``into_container: true``); refused, before anything is read or
    written, when a path is not on the host and the backup does not say so (or is on a tmpfs)."""
    read = await read_facts(conn, [Reads("mounts", (mounts_argv(service),))])
    result = read["mounts"][0]
    mounts = parse_mounts(result)
    if mounts is None:
        raise CouldNotCheck(f"could not read the mounts of container {service.unit}: "
                            f"{' '.join(result.text.split())[:300] or 'the engine printed nothing'}")
    backup = source.backup
    placed = {name: place(live, mounts) for name, live in backup.files.items()}
    reasons = [why for name, where in placed.items()
               if (why := refusal(name, where, service.unit, source.name, backup.into_container)) is not None]
    if reasons:
        raise Refused(f"restore of {conn.host.name} from {source.label} refused, nothing read or written: "
                      + "; ".join(reasons), hint="restore what the image holds by rebuilding or re-pulling it")
    # Watch dirs on a host-backed mount are listed on the host; one in the container's own layer is not moved from.
    watch = [host for path in backup.watch if (host := place(path, mounts).host_path) is not None]
    files = {name: where.host_path or where.live for name, where in placed.items()}
    inside = frozenset(name for name, where in placed.items() if where.host_path is None)
    return replace(source, backup=backup.model_copy(update={"files": files, "watch": watch})), inside


@dataclass(frozen=True)
class InsideRead:
    """What a plan needs of one file inside the container, read by the probe (never through a link)."""

    state: str  # same, differs, missing
    live_sha: str | None
    source_sha: str | None
    source_size: int | None
    live: dict[str, Any]
    evidence: Evidence


async def read_inside(conn: HostConnection, service: Service, files: dict[str, tuple[str, str]]
                      ) -> dict[str, InsideRead]:
    """Each file's live side inside the container (state, digest, mode, owner, diff) and its backup copy on the
    host, in one round trip; a link, a non-file or an unreadable file inside is refused, nothing written."""
    from commands.checks.managers import checks_for

    main_pid = checks_for(service).main_pid(service)
    sources = [src for src, _ in files.values()]
    items = [{"live": live, "src": src} for src, live in files.values()]
    probe = Reads("inside", (probe_script({"describe": items}, listing=False),))
    hashes = Reads("inside-sources", (["sha256sum", "--", *sources],
                                      ["find", *sources, "-maxdepth", "0", "-printf", "%s\\t%p\\0"]))
    read = await read_facts(conn, [main_pid, probe, hashes])
    result, (hashed, sizes) = read["inside"][0], read["inside-sources"]
    records, _ = probe_records(result.output)
    by_path = {str(r.get("p")): r for r in records if r.get("t") == "file"}
    source_hashes = hashes_by_path(hashed.text)
    source_sizes = {rest: int(size) for record in sizes.text.split("\0")
                    for size, _, rest in [record.partition("\t")] if size.isdigit()}
    found: dict[str, InsideRead] = {}
    reasons: list[str] = []
    for name, (src, live) in files.items():
        record, why = live_record(live, result)
        evidence = Evidence.of(f"{hashed.command}\n{result.command}", result.exit_status,
                               f"{hashed.text.rstrip()}\n{json.dumps(by_path.get(live, {}))[:2000]}", result.duration_s)
        state = (record or {}).get("st")
        if record is None or state not in ("ok", "missing"):
            detail = why or _not_read(live, service.unit, record or {})
            reasons.append(f"{name}: {detail}")
            continue
        live_sha = hex_digest(record) if state == "ok" else None
        source_sha = source_hashes.get(src)
        kind = "missing" if state == "missing" else "same" if live_sha == source_sha else "differs"
        found[name] = InsideRead(kind, live_sha, source_sha, source_sizes.get(src), record, evidence)
    if reasons:
        raise Refused(f"restore into container {service.unit} refused, nothing written: " + "; ".join(reasons),
                      hint="fix the container (or the inventory), then plan again")
    return found


def _not_read(live: str, container: str, record: dict[str, Any]) -> str:
    if record.get("st") == "link":
        via = record.get("via")
        return (f"{live} inside container {container} " + (f"is reached through the symlink {via}" if via else
                "is a symlink") + f" to {record.get('target')!r}: not followed")
    return f"{live} inside container {container} is {record.get('st')}: {record.get('err') or 'not a regular file'}"


def inside_check(host: Host, file: Any, backup_name: str) -> ContainerFileCheck:
    """``file:<name>`` of a restore's file inside the container (``file``: a plan's FileState)."""
    container = host.service.unit if host.service else ""
    return ContainerFileCheck(file.name, backup_name, file.source_path, file.live_path, container)


def inside_facts(host: Host, paths: list[str]) -> list[Fact]:
    """The container's main PID (its step keeps $pb_pid), then every path's hash inside it; none without paths."""
    from commands.checks.managers import checks_for

    if not paths or host.service is None:
        return []
    return [checks_for(host.service).main_pid(host.service), ContainerFiles(tuple(paths))]


def inside_step(host: Host, mode: str, items: list[dict[str, str]]) -> BatchStep:
    """One probe run of a restore (``copy_out`` for the snapshot, ``write`` for the replace) on the container's
    current main PID, read by the same step: never a PID remembered from the plan."""
    from commands.checks.managers import checks_for

    assert host.service is not None
    [state] = checks_for(host.service).main_pid(host.service).steps()
    assert isinstance(state, Script)  # a container manager's main-pid step keeps the PID in the batch's shell
    probe = probe_script({mode: items}, listing=False)
    return ShellStep(f"{state.text}\n{probe.text}", probe.shown)
