"""``extra-files``: no file in a watch dir that the backup does not hold (read from the ``file-times`` fact)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from commands.checks.check import Check, Read, Step
from commands.checks.file_times import FILE_TIMES, Listing, escaped, parse_listing, unparsed_finding
from commands.findings import Finding
from commands.frozen import Frozen
from commands.inventory import Backup
from commands.vocabulary import CheckStatus
from commands.wording import short_path


def extra_files_finding(backup_name: str, backup: Backup, listing: Listing) -> Finding:
    """Files in a watch dir that are neither restored by the backup nor held in its dir."""
    unparsed = unparsed_finding("extra-files", listing)
    if unparsed is not None:
        return unparsed
    held = {os.path.basename(path) for path in listing.mtimes if os.path.dirname(path) == backup.dir}
    restored = set(backup.files.values())
    if backup.dir in listing.missing:
        return Finding("extra-files", CheckStatus.ERROR, f"backup dir {backup.dir} does not exist", listing.evidence)
    missing_watch = [path for path in backup.watch if path in listing.missing]
    if missing_watch:
        return Finding("extra-files", CheckStatus.ERROR, f"watch dir missing: {', '.join(missing_watch)}",
                       listing.evidence)
    extras = sorted(
        path
        for path in listing.mtimes
        if os.path.dirname(path) in backup.watch
        and path not in restored
        and os.path.basename(path) not in held
    )
    if extras:
        shown = ", ".join(short_path(escaped(p)) for p in extras[:10]) + (f" and {len(extras) - 10} more"
                                                               if len(extras) > 10 else "")
        return Finding("extra-files", CheckStatus.FAIL,
                       f"{len(extras)} file(s) not in backup {backup_name}: {shown}",
                       listing.evidence, {"extra_files": extras})
    watched = sum(1 for path in listing.mtimes if os.path.dirname(path) in backup.watch)
    return Finding("extra-files", CheckStatus.PASS,
                   f"{watched} file(s) in {len(backup.watch)} watch dir(s), none outside backup {backup_name}",
                   listing.evidence)


@dataclass(frozen=True, eq=False, repr=False)
class ExtraFilesCheck(Check, Frozen):
    backup_name: str
    backup: Backup
    needs: ClassVar[tuple[str, ...]] = (FILE_TIMES,)

    @property
    def name(self) -> str:
        return "extra-files"

    def steps(self) -> list[Step]:
        return []

    def parse(self, read: Read) -> Finding:
        return extra_files_finding(self.backup_name, self.backup, parse_listing(read.of(FILE_TIMES)[0]))
