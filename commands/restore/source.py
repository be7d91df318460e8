"""Restore, where from: a backup of the inventory, or a snapshot proofbot made earlier (for ``--undo``),
its manifest read on the host; either way the live paths come only from the inventory."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Literal

from commands.errors import UnknownBackup, UsageError
from commands.inventory import Backup, Host
from commands.ssh import HostConnection

SNAPSHOT_SUFFIX = ".proofbot-snapshots"
SNAPSHOT_NAME = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[A-Za-z0-9-]{1,64}$")
MANIFEST = "MANIFEST.json"


@dataclass(frozen=True)
class RestoreSource:
    kind: Literal["backup", "snapshot"]
    name: str
    backup: Backup
    snapshot_root: str

    @property
    def label(self) -> str:
        return f"backup {self.name}" if self.kind == "backup" else f"snapshot {self.backup.dir}"


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
    return RestoreSource("snapshot", os.path.basename(path), snapshot_backup(host, path, entries), root)


def snapshot_backup(host: Host, path: str, files: dict[str, str]) -> Backup:
    """A snapshot restores into the dirs of the backup it belongs to, under that backup's trust rule."""
    owner = host.backups[snapshot_roots(host)[os.path.dirname(path)]]
    return Backup(dir=path, files=files, allow_untrusted_dirs=owner.allow_untrusted_dirs,
                  into_container=owner.into_container)
