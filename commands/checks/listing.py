"""One ``find`` that lists watch dirs, the backup dir and the live files with their mtimes.

``extra-files`` reads it for files in a watch dir that the backup does not hold;
``stale-process`` reads it for files changed after the service started.

A watch dir is often a symlink (``/srv/current -> releases/7``): ``find -H`` follows the
links named on its command line (and only those), so such a dir is listed, not skipped.
Records are ``MTIME<TAB>PATH<NUL>``: a file name may hold tabs and newlines (anyone who can
write a watch dir chooses them) but never a NUL, and the mtime comes first, so no name can
forge another file's record. A record that does not parse makes the listing ``error``;
it is never skipped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from commands.command_result import CommandResult
from commands.findings import Evidence, Finding, short_path
from commands.inventory import Backup

_RECORD = re.compile(r"([0-9]+(?:\.[0-9]+)?)\t(/.*)", re.DOTALL)
# find's own messages (stderr, merged into the output) arrive as whole lines between records.
_FIND_MESSAGE = re.compile(r"find: [^\n]*\n?")


@dataclass(frozen=True)
class Listing:
    mtimes: dict[str, float]
    missing: list[str]
    evidence: Evidence
    bad_records: list[str] = field(default_factory=list)


def listing_argv(paths: list[str]) -> list[str]:
    return ["find", "-H", *paths, "-maxdepth", "1", "-type", "f", "-printf", "%T@\\t%p\\0"]


def listing_paths(backup: Backup) -> list[str]:
    """Watch dirs, the backup dir, and the live files that no watch dir already lists."""
    outside = [path for path in backup.files.values() if os.path.dirname(path) not in backup.watch]
    return list(dict.fromkeys([*backup.watch, backup.dir, *outside]))


def parse_listing(result: CommandResult) -> Listing:
    """Strictly: each NUL-ended record is MTIME<TAB>/PATH; anything else is kept as a bad record."""
    mtimes: dict[str, float] = {}
    missing: list[str] = []
    bad: list[str] = []
    shown: list[str] = []
    chunks = result.text.split("\0")
    for index, chunk in enumerate(chunks):
        last = index == len(chunks) - 1
        while match := _FIND_MESSAGE.match(chunk):
            message = match.group(0).rstrip("\n")
            shown.append(message)
            if "No such file" in message:
                missing.append(message.split("'")[1] if message.count("'") >= 2 else message)
            chunk = chunk[match.end():]
        if last and not chunk.strip("\n"):
            break
        record = _RECORD.fullmatch(chunk)
        path = record.group(2) if record else ""
        if record is None or last or mtimes.get(path, float(record.group(1))) != float(record.group(1)):
            # The last chunk has no NUL: a record cut short. One path with two times cannot be
            # trusted either way.
            bad.append(chunk)
            shown.append(f"(record that does not parse) {_escaped(chunk)}")
            continue
        mtimes[path] = float(record.group(1))
        shown.append(f"{record.group(1)}\t{_escaped(path)}")
    evidence = Evidence.of(result.command, result.exit_status, "\n".join(shown), result.duration_s)
    return Listing(mtimes, missing, evidence, bad)


def _escaped(text: str) -> str:
    """One record per evidence line: tabs, newlines and backslashes in names shown escaped."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def unparsed_finding(name: str, listing: Listing) -> Finding | None:
    """``error`` when the listing held a record that does not parse: no verdict rests on a guess."""
    if not listing.bad_records:
        return None
    return Finding(name, "error", f"the listing holds {len(listing.bad_records)} record(s) that do not parse "
                   f"(first: {_escaped(listing.bad_records[0])[:200]!r}): no verdict from it", listing.evidence)


def extra_files_finding(backup_name: str, backup: Backup, listing: Listing) -> Finding:
    """Files in a watch dir that are neither restored by the backup nor held in its dir."""
    unparsed = unparsed_finding("extra-files", listing)
    if unparsed is not None:
        return unparsed
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
        shown = ", ".join(short_path(_escaped(p)) for p in extras[:10]) + (f" and {len(extras) - 10} more"
                                                               if len(extras) > 10 else "")
        return Finding("extra-files", "fail",
                       f"{len(extras)} file(s) not in backup {backup_name}: {shown}",
                       listing.evidence, {"extra_files": extras})
    watched = sum(1 for path in listing.mtimes if os.path.dirname(path) in backup.watch)
    return Finding("extra-files", "pass",
                   f"{watched} file(s) in {len(backup.watch)} watch dir(s), none outside backup {backup_name}",
                   listing.evidence)
