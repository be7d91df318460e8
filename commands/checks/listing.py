"""One ``find`` that lists watch dirs, the backup dir and the live files with their mtimes.

``extra-files`` reads it for files in a watch dir that the backup does not hold;
``stale-process`` reads it for files changed after the service started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.inventory import Backup


@dataclass(frozen=True)
class Listing:
    mtimes: dict[str, float]
    missing: list[str]
    evidence: Evidence


def listing_argv(paths: list[str]) -> list[str]:
    return ["find", *paths, "-maxdepth", "1", "-type", "f", "-printf", "%p\\t%T@\\n"]


def listing_paths(backup: Backup) -> list[str]:
    """Watch dirs, the backup dir, and the live files that no watch dir already lists."""
    outside = [path for path in backup.files.values() if os.path.dirname(path) not in backup.watch]
    return list(dict.fromkeys([*backup.watch, backup.dir, *outside]))


def parse_listing(result: CommandResult) -> Listing:
    mtimes: dict[str, float] = {}
    missing: list[str] = []
    for line in result.text.splitlines():
        path, tab, mtime = line.rpartition("\t")
        if tab and path.startswith("/"):
            try:
                mtimes[path] = float(mtime)
            except ValueError:
                continue
        elif line.startswith("find:") and "No such file" in line:
            missing.append(line.split("'")[1] if "'" in line else line)
    evidence = Evidence.of(result.command, result.exit_status, result.text, result.duration_s)
    return Listing(mtimes, missing, evidence)


def extra_files_finding(backup_name: str, backup: Backup, listing: Listing) -> Finding:
    """Files in a watch dir that are neither restored by the backup nor held in its dir."""
    held = {os.path.basename(path) for path in listing.mtimes if os.path.dirname(path) == backup.dir}
    restored = set(backup.files.values())
    if backup.dir in listing.missing:
        return Finding("extra-files", "error", f"backup dir {backup.dir} does not exist", listing.evidence)
    missing_watch = [path for path in backup.watch if path in listing.missing]
    if missing_watch:
        return Finding("extra-files", "error", f"watch dir missing: {', '.join(missing_watch)}",
                       listing.evidence)
    extras = sorted(
        path
        for path in listing.mtimes
        if os.path.dirname(path) in backup.watch
        and path not in restored
        and os.path.basename(path) not in held
    )
    if extras:
        shown = ", ".join(extras[:10]) + (f" and {len(extras) - 10} more" if len(extras) > 10 else "")
        return Finding("extra-files", "fail",
                       f"{len(extras)} file(s) not in backup {backup_name}: {shown}",
                       listing.evidence, {"extra_files": extras})
    watched = sum(1 for path in listing.mtimes if os.path.dirname(path) in backup.watch)
    return Finding("extra-files", "pass",
                   f"{watched} file(s) in {len(backup.watch)} watch dir(s), none outside backup {backup_name}",
                   listing.evidence)
