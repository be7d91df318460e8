"""Check parsers on recorded host output: each turns output into the finding a person expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands.checks.cmdline import cmdline_finding, has_flag
from commands.checks.extra_files import extra_files_finding
from commands.checks.file_times import parse_listing
from commands.checks.files import parse_file_hash
from commands.checks.service import main_pid_finding
from commands.checks.stale import ProcessStart, parse_process_start, stale_finding
from commands.command_result import CommandResult
from commands.inventory import Backup, Service

RECORDED = Path(__file__).parent / "recorded"
BACKUP_DIR = "/root/sglang-ddtree-backup-20260522"
LIVE_DIR = "/root/ml-env/lib/python3.12/site-packages/sglang/srt/speculative"
SERVER_ARGS = "/root/ml-env/lib/python3.12/site-packages/sglang/srt/server_args.py"


def recorded(name: str, exit_status: int = 0, command: str = "recorded") -> CommandResult:
    return CommandResult(command, exit_status, (RECORDED / name).read_bytes(), 0.01)


def service(manager: str = "systemd", **extra: object) -> Service:
    return Service.model_validate({"manager": manager, "unit": "sglang",
                                   "health_url": "http://127.0.0.1:30000/health", **extra})


BACKUP = Backup(dir=BACKUP_DIR, files={"spec_info.py": f"{LIVE_DIR}/spec_info.py",
                                       "eagle_info.py": f"{LIVE_DIR}/eagle_info.py",
                                       "server_args.py": SERVER_ARGS},
                watch=[LIVE_DIR])


def test_differing_hashes_fail_with_both_prefixes() -> None:
    finding = parse_file_hash("spec_info.py", "pre-ddtree", f"{BACKUP_DIR}/spec_info.py",
                              f"{LIVE_DIR}/spec_info.py", recorded("sha256_differs.txt"))
    assert finding.status == "fail"
    assert "3bb1a99ba95f" in finding.summary and "a6a47227d18a" in finding.summary
    assert finding.evidence is not None and "a6a47227" in finding.evidence.output


def test_identical_hashes_pass() -> None:
    same = b"a" * 64 + b"  /b/x.py\n" + b"a" * 64 + b"  /l/x.py\n"
    finding = parse_file_hash("x.py", "pre", "/b/x.py", "/l/x.py", CommandResult("c", 0, same, 0.0))
    assert finding.status == "pass"


def test_missing_live_file_is_a_failure() -> None:
    finding = parse_file_hash("spec_info.py", "pre-ddtree", f"{BACKUP_DIR}/spec_info.py",
                              f"{LIVE_DIR}/spec_info.py", recorded("sha256_live_missing.txt", 1))
    assert finding.status == "fail"
    assert "missing" in finding.summary


def test_unreadable_backup_is_could_not_check() -> None:
    finding = parse_file_hash("spec_info.py", "pre-ddtree", f"{BACKUP_DIR}/spec_info.py",
                              f"{LIVE_DIR}/spec_info.py", recorded("sha256_backup_denied.txt", 1))
    assert finding.status == "error"
    assert "Permission denied" in finding.summary


def test_empty_output_never_passes() -> None:
    finding = parse_file_hash("x.py", "pre", "/b/x.py", "/l/x.py", CommandResult("c", 0, b"", 0.0))
    assert finding.status == "error"


def test_systemd_active_unit_reports_main_pid() -> None:
    finding, state = main_pid_finding(service(), recorded("systemctl_show_active.txt"))
    assert finding.status == "pass"
    assert state is not None and state.main_pid == 302221
    assert state.properties["InvocationID"] == "5b0c7d8e4f2a4b1c9d3e6f708192a3b4"


def test_systemd_failed_unit_fails() -> None:
    finding, state = main_pid_finding(service(), recorded("systemctl_show_failed.txt"))
    assert finding.status == "fail"
    assert state is not None and state.main_pid is None


@pytest.mark.parametrize(
    ("recording", "status", "pid"),
    [("supervisorctl_running.txt", "pass", 15587), ("supervisorctl_starting.txt", "fail", None),
     ("supervisorctl_fatal.txt", "fail", None), ("supervisorctl_unknown.txt", "error", None),
     ("supervisorctl_down.txt", "error", None)],
)
def test_supervisorctl_states(recording: str, status: str, pid: int | None) -> None:
    finding, state = main_pid_finding(service("supervisord"), recorded(recording))
    assert finding.status == status
    assert (state.main_pid if state else None) == pid


def test_no_output_from_the_manager_is_an_error_not_a_pass() -> None:
    finding, _ = main_pid_finding(service(), CommandResult("systemctl show", 0, b"", 0.0))
    assert finding.status == "error"


def test_cmdline_with_expected_flag_passes_and_secret_is_redacted() -> None:
    svc = service(expect_flags=["--speculative-algorithm NEXTN"], forbid_flags=["--enable-ddtree"])
    finding = cmdline_finding(svc, 42, recorded("cmdline_nextn.bin"))
    assert finding.status == "pass"
    assert finding.evidence is not None
    assert "sk-live-abcdefghijklmnop" not in finding.evidence.output
    assert "--api-key [REDACTED]" in finding.evidence.output


def test_cmdline_forbidden_and_missing_flags_fail() -> None:
    svc = service(expect_flags=["--speculative-algorithm EAGLE"], forbid_flags=["--port"])
    finding = cmdline_finding(svc, 42, recorded("cmdline_nextn.bin"))
    assert finding.status == "fail"
    assert "missing --speculative-algorithm EAGLE" in finding.summary
    assert "forbidden --port present" in finding.summary


def test_cmdline_of_vanished_process_is_an_error() -> None:
    finding = cmdline_finding(service(), 42, CommandResult("cat /proc/42/cmdline", 1, b"cat: No such file", 0.0))
    assert finding.status == "error"


@pytest.mark.parametrize(
    ("args", "flag", "expected"),
    [(["--a", "b"], "--a b", True), (["--a=b"], "--a b", True), (["--a", "c"], "--a b", False),
     (["--enable-ddtree"], "--enable-ddtree", True), (["--enable-ddtree=true"], "--enable-ddtree", True),
     (["--enable-ddtree-x"], "--enable-ddtree", False), (["x", "--a"], "--a b", False)],
)
def test_flag_matching(args: list[str], flag: str, expected: bool) -> None:
    assert has_flag(args, flag) is expected


def test_extra_files_are_those_neither_restored_nor_held() -> None:
    listing = parse_listing(recorded("find_listing.bin"))
    finding = extra_files_finding("pre-ddtree", BACKUP, listing)
    assert finding.status == "fail"
    assert finding.details["extra_files"] == [f"{LIVE_DIR}/ddtree_utils.py"]


def test_missing_watch_dir_is_could_not_check() -> None:
    output = f"find: '{LIVE_DIR}': No such file or directory\n".encode()
    finding = extra_files_finding("pre-ddtree", BACKUP, parse_listing(CommandResult("find", 1, output, 0.0)))
    assert finding.status == "error"


def test_process_start_from_proc_stat() -> None:
    start = parse_process_start(15587, recorded("proc_stat_uptime.txt"),
                                CommandResult("date", 0, b"1796015483.354632820\n", 0.0),
                                CommandResult("getconf", 0, b"100\n", 0.0))
    assert start is not None
    # started 463.83 s after boot; boot was 465.20 s before "now"
    assert start.started_at == pytest.approx(1796015483.3546 - 465.20 + 463.83, abs=0.001)


def test_files_newer_than_the_process_are_a_warning_saying_restart() -> None:
    listing = parse_listing(recorded("find_listing.bin"))
    files = list(listing.mtimes)
    start = ProcessStart(99, 1796015480.5)
    finding = stale_finding(start, files, listing, [CommandResult("date", 0, b"x", 0.0)])
    assert finding.status == "warn"
    assert "restart it" in finding.summary
    assert f"{LIVE_DIR}/ddtree_utils.py" in finding.details["changed_after_start"]


def test_process_newer_than_every_file_passes() -> None:
    listing = parse_listing(recorded("find_listing.bin"))
    finding = stale_finding(ProcessStart(99, 1796015490.0), list(listing.mtimes), listing,
                            [CommandResult("date", 0, b"x", 0.0)])
    assert finding.status == "pass"


def test_a_name_with_a_tab_and_newline_cannot_forge_an_mtime() -> None:
    """Recorded from a real find: a file named 'spec_info.py<TAB>0<NL>zzz' sits in the watch dir."""
    listing = parse_listing(recorded("find_listing_hostile_name.bin"))
    hostile = f"{LIVE_DIR}/spec_info.py\t0\nzzz"
    assert listing.mtimes[f"{LIVE_DIR}/spec_info.py"] == pytest.approx(1796015480.9223208)
    assert listing.mtimes[hostile] == pytest.approx(1796015485.5)
    assert not listing.bad_records
    finding = stale_finding(ProcessStart(99, 1796015481.0), [f"{LIVE_DIR}/spec_info.py", hostile], listing,
                            [CommandResult("date", 0, b"x", 0.0)])
    assert finding.status == "warn" and hostile in finding.details["changed_after_start"]
    extra = extra_files_finding("pre-ddtree", BACKUP, listing)
    assert hostile in extra.details["extra_files"] and "spec_info.py\\t0\\nzzz" in extra.summary


@pytest.mark.parametrize("output", [
    b"1796015480.9\t/root/x.py",                      # cut short: no NUL at the end
    b"1796015480.9\t/root/x.py\0garbage\0",           # a record that is not MTIME<TAB>/PATH
    b"/root/x.py\t1796015480.9\n",                    # the old newline format
    b"1796015480.9\t/root/x.py\x001796015999.0\t/root/x.py\0",  # one path, two times
])
def test_a_record_that_does_not_parse_is_an_error_never_skipped(output: bytes) -> None:
    listing = parse_listing(CommandResult("find", 0, output, 0.0))
    assert listing.bad_records
    assert extra_files_finding("pre-ddtree", BACKUP, listing).status == "error"
    finding = stale_finding(ProcessStart(99, 1796015490.0), ["/root/x.py"], listing,
                            [CommandResult("date", 0, b"x", 0.0)])
    assert finding.status == "error" and "do not parse" in finding.summary


def test_find_messages_between_records_are_read_not_taken_for_records() -> None:
    output = (f"find: '{BACKUP_DIR}': No such file or directory\n".encode()
              + f"1796015480.9\t{LIVE_DIR}/spec_info.py\0".encode())
    listing = parse_listing(CommandResult("find", 1, output, 0.0))
    assert not listing.bad_records and listing.missing == [BACKUP_DIR]
    assert extra_files_finding("pre-ddtree", BACKUP, listing).summary == f"backup dir {BACKUP_DIR} does not exist"
