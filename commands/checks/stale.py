"""``stale-process``: no watched or restored file changed after the running process started.

The start time comes from ``/proc/PID/stat`` (clock ticks since boot), ``/proc/uptime``
and the host's clock, all read in one round trip, so it has 10 ms resolution.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar, NamedTuple

from commands.checks.check import Check, Read, Step
from commands.checks.file_times import FILE_TIMES, Listing, parse_listing, unparsed_finding
from commands.checks.pid_read import MAIN_PID_READ, as_read, process_start_steps
from commands.checks.service import agreed_pid
from commands.clock import utc_at
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding, could_not_check
from commands.frozen import Frozen
from commands.inventory import Service
from commands.vocabulary import CheckStatus
from commands.wording import age_words, short_path

# A file written in the same instant the process started is not evidence of staleness.
MTIME_TOLERANCE_S = 0.05


class ProcessStart(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    pid: int
    started_at: float
    seen_at: float | None = None  # the host's clock when it was read: "(3 h 12 min ago)"

    def words(self) -> str:
        """'14:02:11 UTC (3 h 12 min ago)'; the exact time stays in the details."""
        clock = datetime.fromtimestamp(self.started_at, UTC).strftime("%H:%M:%S UTC")
        return f"{clock} ({age_words(self.seen_at - self.started_at)} ago)" if self.seen_at else clock


def process_start_argvs(pid: int) -> list[list[str]]:
    return [["cat", f"/proc/{pid}/stat", "/proc/uptime"], ["date", "+%s.%N"], ["getconf", "CLK_TCK"]]


def parse_process_start(pid: int, stat: CommandResult, now: CommandResult, ticks: CommandResult
                        ) -> ProcessStart | None:
    lines = stat.text.splitlines()
    if stat.exit_status != 0 or len(lines) < 2 or ")" not in lines[0]:
        return None
    try:
        fields = lines[0].rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])
        uptime = float(lines[1].split()[0])
        host_now = float(now.text.strip())
        per_second = int(ticks.text.strip() or "100")
    except (ValueError, IndexError):
        return None
    return ProcessStart(pid, host_now - uptime + start_ticks / per_second, host_now)


def stale_finding(start: ProcessStart | None, files: list[str], listing: Listing,
                  commands: list[CommandResult]) -> Finding:
    command = "\n".join([listing.evidence.command, *(result.command for result in commands)])
    # The whole listing is extra-files' evidence; here only the lines of the files compared.
    compared = "\n".join(f"{path}\t{listing.mtimes[path]}" for path in files if path in listing.mtimes)
    sections = [(listing.evidence.command, compared or "(none of the compared files listed)")]
    sections += [(r.command, r.text) for r in commands]
    output = "\n".join(f"# {cmd}\n{text.rstrip()}" for cmd, text in sections)
    duration = listing.evidence.duration_s + sum(result.duration_s for result in commands)
    evidence = Evidence.of(command, max(result.exit_status for result in commands), output, duration)
    if start is None:
        return Finding("stale-process", CheckStatus.ERROR, "could not read the process start time", evidence)
    unparsed = unparsed_finding("stale-process", listing)
    if unparsed is not None:
        return Finding("stale-process", CheckStatus.ERROR, unparsed.summary, evidence)
    known = {path: listing.mtimes[path] for path in files if path in listing.mtimes}
    if not known:
        return Finding("stale-process", CheckStatus.ERROR, "none of the watched files could be listed", evidence)
    newer = sorted((path for path, mtime in known.items() if mtime > start.started_at + MTIME_TOLERANCE_S),
                   key=lambda path: known[path])
    started = utc_at(start.started_at)
    details = {"process_started_at": started, "changed_after_start": {p: utc_at(known[p]) for p in newer}}
    if newer:
        names = ", ".join(map(short_path, newer[:5])) + (f" and {len(newer) - 5} more" if len(newer) > 5 else "")
        return Finding("stale-process", CheckStatus.WARN,
                       f"PID {start.pid} started {start.words()} but {len(newer)} file(s) changed after it: "
                       f"{names}; the service is still running the old code: restart it",
                       evidence, details)
    newest = max(known.values())
    return Finding("stale-process", CheckStatus.PASS,
                   f"PID {start.pid} started {start.words()}, after every watched file (newest {utc_at(newest)})",
                   evidence, details)


@dataclass(frozen=True, eq=False, repr=False)
class StaleCheck(Check, Frozen):
    """``stale-process``: the main PID the batch read, its start against the ``file-times`` of the files
    restored (``files``) or in a watch dir (``dirs``)."""

    service: Service
    files: tuple[str, ...]
    dirs: tuple[str, ...] = ()
    needs: ClassVar[tuple[str, ...]] = ("main-pid", MAIN_PID_READ, FILE_TIMES)

    @property
    def name(self) -> str:
        return "stale-process"

    def steps(self) -> list[Step]:
        return process_start_steps()

    def parse(self, read: Read) -> Finding:
        pid, why = agreed_pid(self.service, read)
        if pid is None:
            return could_not_check("stale-process", why or "no running main PID to compare file times with")
        start_reads = as_read(list(read.own), process_start_argvs(pid))
        listing = parse_listing(read.of(FILE_TIMES)[0])
        restored, dirs = set(self.files), set(self.dirs)  # a watch dir may list thousands: no scan per path
        files = [path for path in listing.mtimes if path in restored or os.path.dirname(path) in dirs]
        return stale_finding(parse_process_start(pid, *start_reads), files, listing, start_reads)
