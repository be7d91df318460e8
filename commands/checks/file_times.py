"""A fact, not a check: one ``find`` that lists watch dirs, the backup dir and the live files with their mtimes.

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
from dataclasses import dataclass
from typing import NamedTuple

from commands.checks.check import Fact, Step
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.frozen import Frozen
from commands.inventory import Backup
from commands.vocabulary import CheckStatus

FILE_TIMES = "file-times"  # the fact's name, as the checks that read it need it
_RECORD = re.compile(r"([0-9]+(?:\.[0-9]+)?)\t(/.*)", re.DOTALL)
# find's own messages (stderr, merged into the output) arrive as whole lines between records.
_FIND_MESSAGE = re.compile(r"find: [^\n]*\n?")


class Listing(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    mtimes: dict[str, float]
    missing: list[str]
    evidence: Evidence
    bad_records: list[str]


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
            shown.append(f"(record that does not parse) {escaped(chunk)}")
            continue
        mtimes[path] = float(record.group(1))
        shown.append(f"{record.group(1)}\t{escaped(path)}")
    evidence = Evidence.of(result.command, result.exit_status, "\n".join(shown), result.duration_s)
    return Listing(mtimes, missing, evidence, bad)


def escaped(text: str) -> str:
    """One record per evidence line: tabs, newlines and backslashes in names shown escaped."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def unparsed_finding(name: str, listing: Listing) -> Finding | None:
    """``error`` when the listing held a record that does not parse: no verdict rests on a guess."""
    if not listing.bad_records:
        return None
    return Finding(name, CheckStatus.ERROR, f"the listing holds {len(listing.bad_records)} record(s) that do not parse "
                   f"(first: {escaped(listing.bad_records[0])[:200]!r}): no verdict from it", listing.evidence)


@dataclass(frozen=True, eq=False, repr=False)
class FileTimes(Fact, Frozen):
    """The listing as a fact of a plan: ``extra-files`` and ``stale-process`` parse it by this name."""

    paths: tuple[str, ...]

    @property
    def name(self) -> str:
        return FILE_TIMES

    def steps(self) -> list[Step]:
        return [listing_argv(list(self.paths))]

    @classmethod
    def of_backup(cls, backup: Backup) -> FileTimes:
        return cls(tuple(listing_paths(backup)))
