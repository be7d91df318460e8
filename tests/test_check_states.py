"""Tier 1: check verdicts on states the recordings lack: names sha256sum escapes, a missing live file, a
process start that cannot be read, and dpkg states other than installed or absent (from the real tools
where this machine has them: sha256sum, find, /proc)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from commands.checks.deb import parse_deb
from commands.checks.file_times import listing_argv, parse_listing
from commands.checks.files import file_hash_argv, hashes_by_path, parse_file_hash
from commands.checks.stale import parse_process_start, process_start_argvs, stale_finding
from commands.command_result import CommandResult

RECORDED = Path(__file__).parent / "recorded"


def run(argv: list[str]) -> CommandResult:
    """What the host would send back: stdout and stderr as one stream, and the exit status."""
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=60)
    return CommandResult(" ".join(argv), done.returncode, done.stdout, 0.01)


def test_names_sha256sum_escapes_are_read_back_as_the_real_names(tmp_path: Path) -> None:
    names = ["back\\slash.py", "new\nline.py", "both\\and\nboth.py", "plain.py"]
    paths = [tmp_path / name for name in names]
    for number, path in enumerate(paths):
        path.write_text(f"content {number}\n")
    hashes = hashes_by_path(run(["sha256sum", "--", *map(str, paths)]).text)
    assert hashes == {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def test_a_live_file_with_an_escaped_name_matches_its_backup_and_a_missing_one_fails(tmp_path: Path) -> None:
    backup, live = tmp_path / "b\\ack\nup", tmp_path / "li\\ve"
    backup.write_text("same\n")
    live.write_text("same\n")
    same = parse_file_hash("cfg", "b1", str(backup), str(live), run(file_hash_argv(str(backup), str(live))))
    assert same.status == "pass", same.summary
    live.unlink()
    gone = parse_file_hash("cfg", "b1", str(backup), str(live), run(file_hash_argv(str(backup), str(live))))
    assert gone.status == "fail" and gone.summary == f"live file {live} is missing"


def test_a_proc_stat_line_cut_short_is_no_start_time_and_the_stale_check_says_it_could_not_read_it(
        tmp_path: Path) -> None:
    pid = os.getpid()
    stat, now, ticks = (run(argv) for argv in process_start_argvs(pid))
    real = parse_process_start(pid, stat, now, ticks)
    assert real is not None and real.seen_at is not None and real.started_at <= real.seen_at
    first, rest = stat.output.split(b"\n", 1)
    cut = CommandResult(stat.command, 0, first[: first.index(b")") + 10] + b"\n" + rest, 0.01)
    assert parse_process_start(pid, cut, now, ticks) is None
    (tmp_path / "watched.py").write_text("x\n")
    listing = parse_listing(run(listing_argv([str(tmp_path)])))
    finding = stale_finding(None, [str(tmp_path / "watched.py")], listing, [stat, now, ticks])
    assert finding.status == "error" and finding.summary == "could not read the process start time"
    unlisted = stale_finding(real, [str(tmp_path / "not-there.py")], listing, [stat, now, ticks])
    assert unlisted.status == "error" and unlisted.summary == "none of the watched files could be listed"


def deb(text: str, exit_status: int = 0) -> CommandResult:
    return CommandResult("sh -c …", exit_status, text.encode(), 0.05)


def pristine_with_status(line: str) -> str:
    text = (RECORDED / "deb_pristine.txt").read_text()
    return text.replace("install ok installed\t", line + "\t", 1)


def test_a_package_half_installed_or_purged_is_an_error_never_a_verdict_on_its_files() -> None:
    half = parse_deb("libc6:amd64", deb(pristine_with_status("install ok half-installed")))
    assert half.status == "error"
    assert half.summary == ("libc6:amd64 is not fully installed (status 'install ok half-installed'): "
                            "dpkg's record of its files cannot be trusted")
    purged = parse_deb("libc6:amd64", deb(pristine_with_status("unknown ok not-installed")))
    assert purged.status == "error"
    assert purged.summary == "libc6:amd64 is not installed (status 'unknown ok not-installed')"


def test_dpkg_query_failing_otherwise_and_no_sections_at_all_are_errors_that_say_what_came_back() -> None:
    text = (RECORDED / "deb_pristine.txt").read_text()
    rest = text.split("@rc 0\n", 1)[1]
    locked = "@status\ndpkg-query: error: parsing file '/var/lib/dpkg/status' near line 7\n@rc 2\n" + rest
    finding = parse_deb("libc6:amd64", deb(locked))
    assert finding.status == "error"
    assert finding.summary.startswith("dpkg-query could not tell whether libc6:amd64 is installed: dpkg-query: error")
    garbled = parse_deb("libc6:amd64", deb("sh: 1: cannot create /tmp/x: Read-only file system\n", 2))
    assert garbled.status == "error"
    assert garbled.summary == ("the dpkg commands gave no usable output (exit 2): "
                               "sh: 1: cannot create /tmp/x: Read-only file system")
