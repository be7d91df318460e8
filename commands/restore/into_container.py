"""Restore into a container service, decided before anything is read or written: each live path is looked up in
the container's mounts (``inspect`` ``Mounts``, read on the host). A bind-mounted or volume path is a host path
(its source): restored there as on any host. A path in the container's own layer is refused (a recreate would lose
it) unless the backup says ``into_container: true``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace

from commands.checks.check import Reads
from commands.command_result import CommandResult
from commands.errors import CouldNotCheck, Refused
from commands.inventory import Service
from commands.inventory.containers import Engine
from commands.restore.source import RestoreSource
from commands.ssh import HostConnection
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
    return [*engine.argv(), "inspect", "--type", "container", "--format", MOUNTS_FORMAT, service.unit]


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
    if placed.host_path is not None:
        return None
    if placed.mount is not None:
        return (f"{placed.live} is on a {placed.mount.kind} mount of container {container}: nothing on the host "
                "to restore it into")
    if into_container:
        return (f"{placed.live} is in container {container}'s own layer and backup {backup_name} says "
                "into_container: true, but writing inside a container is not built yet: nothing written")
    return (f"{name}: {placed.live} is in container {container}'s own layer: a restore there is lost at the next "
            "recreate; rebuild or re-pull the image (or set into_container: true on backup "
            f"{backup_name} to write it there anyway)")


async def container_source(conn: HostConnection, source: RestoreSource, service: Service) -> RestoreSource:
    """The source with each live path mapped to the host path it is mounted from; refused, before anything is
    read or written, when a path is not on the host (the container's own layer, a tmpfs)."""
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
    files = {name: str(where.host_path) for name, where in placed.items()}
    return replace(source, backup=backup.model_copy(update={"files": files, "watch": watch}))
