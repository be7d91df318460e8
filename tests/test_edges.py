"""Edges that no other tier-1 test held: each test here fails on one small slip of the code it names
(a dropped letter in a pattern, ``and`` for ``or``, an off-by-one bound), found by breaking it on purpose."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import pytest_asyncio

from commands.checks.cmdline import cmdline_finding
from commands.checks.extra_files import extra_files_finding
from commands.checks.file_times import listing_argv, listing_paths, parse_listing
from commands.checks.files import file_hash_argv, parse_file_hash
from commands.checks.package import parse_package
from commands.checks.probe import LOW_VARIETY_MAX_DISTINCT, LOW_VARIETY_MIN_LENGTH, degenerate, request_text
from commands.checks.service import main_pid_finding, service_state_argv
from commands.checks.stale import ProcessStart, stale_finding
from commands.command_result import CommandResult
from commands.errors import Locked, Refused, UsageError
from commands.findings import Finding, could_not_check, trim, verdict_of
from commands.holder import Holder, pid_alive
from commands.inventory import Approvals, Backup, Probe, Service
from commands.redact import redact, redact_data
from commands.store import approvals, locks
from commands.store.approvals import ClickedOn
from commands.store.chain import Anchor, ChainReport, parse_anchor, verify_chain
from commands.store.db import AuditStore
from commands.store.events import event_hash, stored_details
from commands.wording import age_words, short_path
from tests.audit_events import cli_origin, raw_append, record_operation

RECORDED = Path(__file__).parent / "recorded"
NOBODY = 65534


# ---------------------------------------------------------------- redaction: every Slack token type
@pytest.mark.parametrize("token", ["xoxa-2-abcdefghij", "xoxb-abcdefghijkl", "xoxp-1234567890", "xoxo-abcdefgh",
                                   "xoxs-abcdefgh", "xoxr-abcdefgh", "xapp-1-abcdefgh"])
def test_short_slack_tokens_of_every_kind_are_masked(token: str) -> None:
    """Slack's token prefixes (bot, user, app, workspace, refresh, legacy), short and under a key that
    names no secret: only the token's own shape can catch them."""
    for text in (f"SLACK={token}", f"posted with {token} at 10:00", f"url?t={token}&x=1"):
        shown = redact(text)
        assert token not in shown and token[5:] not in shown, shown
        assert "[REDACTED]" in shown


def test_a_secret_two_detectors_see_is_masked_once() -> None:
    line = "//registry.npmjs.org/:_authToken=npm_TkNpmToken0123456789abcdefABCDEF1234"
    assert redact(line) == "//registry.npmjs.org/:_authToken=[REDACTED]"


def test_a_folded_yaml_block_under_a_secret_key_is_masked() -> None:
    shown = redact("db:\n  password: >\n    Yfolded-secret-4411\n    more-words-here\n  user: app")
    assert "Yfolded-secret-4411" not in shown and "more-words-here" not in shown and "user: app" in shown


def test_structured_values_are_masked_only_under_secret_names() -> None:
    data = {"summary": "3 checks passed", "_": "ok, nothing secret", "password": "hunter2x", "db": {"token": "t0k3n-x"}}
    assert redact_data(data) == {"summary": "3 checks passed", "_": "ok, nothing secret", "password": "[REDACTED]",
                                 "db": {"token": "[REDACTED]"}}


# ---------------------------------------------------------------- RECORD: a same-size edit
def test_a_same_size_edit_of_a_module_fails_against_record() -> None:
    """The real probe output of a pristine install, with one module edited in place to the same length
    (``"NEXTN"`` → ``"NEXTX"``): its size still matches RECORD, only its hash tells."""
    rows = [json.loads(line) for line in (RECORDED / "package_pristine.jsonl").read_text().splitlines()]
    [module] = [row for row in rows if row.get("p") == "sgl_kernel/speculative.py"]
    assert module["st"] == "ok" and module["d"] == module["h"].partition("=")[2]
    module["d"] = "q" * 43  # another sha256 (43 urlsafe base64 characters), same size
    output = "".join(json.dumps(row) + "\n" for row in rows).encode()
    finding = parse_package("/root/ml-env/bin/python", "sgl-kernel", CommandResult("probe", 0, output, 0.05))
    assert finding.status == "fail", finding.summary
    size = module["size"]
    assert f"sgl_kernel/speculative.py differs from RECORD: size {size} B (recorded {size} B)" in finding.summary


# ---------------------------------------------------------------- holder: one we may not signal
def test_a_holder_this_user_may_not_signal_is_presumed_alive() -> None:
    """kill(pid, 0) answers EPERM for another user's live process: it is alive, never 'gone'. Asked by an
    unprivileged user about a root process: as root, a forked child that drops to nobody asks about this
    (root) process; otherwise this user asks about PID 1, root's init."""
    if os.geteuid() != 0:
        with pytest.raises(PermissionError):
            os.kill(1, 0)
        assert pid_alive(1) and not Holder(socket.gethostname(), 1, None).is_gone()
        return
    target = os.getpid()
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads: the child only calls os.*
        child = os.fork()
    if child == 0:  # pragma: no cover - the child's answer is checked below
        answer = "child failed"
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                os.kill(target, 0)
                refused = "signalled"
            except PermissionError:
                refused = "EPERM"
            answer = f"{refused} {pid_alive(target)} {Holder(socket.gethostname(), target, None).is_gone()}"
        finally:
            os.write(write_end, answer.encode())
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        answer = pipe.read()
    os.waitpid(child, 0)
    assert answer == "EPERM True False"


# ---------------------------------------------------------------- probe: the low-variety bound
def test_low_variety_bound_is_three_distinct_characters_at_twelve() -> None:
    assert (LOW_VARIETY_MAX_DISTINCT, LOW_VARIETY_MIN_LENGTH) == (3, 12)
    assert degenerate("ab.ab.ab.ab.") == "very low character variety: 3 distinct characters in 12"
    assert degenerate("ab.ab.ab.ab") is None  # 11 characters: too short to judge
    assert degenerate("ab.!ab.!ab.!") is None  # 4 distinct characters: could be a real answer
    assert degenerate("OK") is None


def test_one_character_twice_is_degenerate_once_is_an_answer() -> None:
    assert degenerate("!!") == "one character repeated: '!' 2 times"
    assert degenerate("4") is None


def test_one_word_six_times_is_degenerate_five_times_is_not() -> None:
    assert degenerate("hello hello hello hello hello hello") == "one word repeated: 'hello' 6 times"
    assert degenerate("hello hello hello hello hello") is None


def test_the_probe_request_is_shown_as_sent_with_its_own_characters() -> None:
    probe = Probe.model_validate({"url": "http://127.0.0.1:30000/v1/chat/completions",
                                  "json": {"messages": [{"role": "user", "content": "Réponds « OK »"}]}})
    shown = request_text(probe, "POST /v1/chat/completions")
    assert shown.startswith("POST /v1/chat/completions\n") and "Réponds « OK »" in shown


# ---------------------------------------------------------------- audit chain: one row off
@pytest_asyncio.fixture
async def db(tmp_path: Path) -> Path:
    path = tmp_path / "audit.db"
    store = AuditStore.open(path)
    await record_operation(store, "op-1", origin=cli_origin())
    store.close()
    return path


async def check(db: Path) -> ChainReport:
    store = AuditStore.open(db)
    try:
        return await verify_chain(store)
    finally:
        store.close()


async def test_one_deleted_last_row_is_caught_after_the_bot_appends_again(db: Path) -> None:
    """The last event deleted (guards dropped), then the bot appends as usual: every link holds, the
    head moved on, and only the count (one short) tells."""
    conn = sqlite3.connect(db, isolation_level=None)
    (last,) = conn.execute("SELECT MAX(id) FROM events").fetchone()
    conn.execute("DROP TRIGGER events_are_append_only_delete")
    conn.execute("DELETE FROM events WHERE id = ?", (last,))
    conn.close()
    store = AuditStore.open(db)
    await raw_append(store, "bot-started")
    store.close()
    report = await check(db)
    assert report.broken is not None and report.broken.problem == "deleted", report
    assert f"{last} events but {last + 1} were appended: 1 rows were deleted" in report.broken.detail


async def test_one_row_added_with_the_head_moved_but_not_counted_is_caught(db: Path) -> None:
    """A well-linked event appended by hand, the head pointed at it by hand (its count left alone)."""
    conn = sqlite3.connect(db, isolation_level=None)
    for trigger in ("events_move_chain_head", "chain_head_follows_appends"):
        conn.execute(f"DROP TRIGGER {trigger}")
    last_id, head = conn.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
    fields = {"at": "2026-05-22T10:00:00.000Z", "operation_id": None, "operation": None, "host": None,
              "kind": "bot-started", "actor": None, "details": {}, "prev_hash": head}
    conn.execute("INSERT INTO events (at, kind, details, prev_hash, hash) VALUES (?, 'bot-started', '{}', ?, ?)",
                 (fields["at"], head, event_hash(fields)))
    conn.execute("UPDATE chain_head SET event_id = ?, hash = ?", (last_id + 1, event_hash(fields)))
    conn.close()
    report = await check(db)
    assert report.broken is not None, report
    assert f"{last_id + 1} events but {last_id} were appended" in report.broken.detail


async def test_the_last_event_replaced_and_rehashed_is_caught_by_the_head(db: Path) -> None:
    """The last event's verdict rewritten and its hash recomputed (update guard dropped): every link
    holds and the count is right; only the head, which recorded the old hash, tells."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER events_are_append_only_update")
    row = conn.execute("SELECT id, at, operation_id, operation, host, kind, actor, details, prev_hash FROM events "
                       "ORDER BY id DESC LIMIT 1").fetchone()
    fields = dict(zip(("at", "operation_id", "operation", "host", "kind", "actor", "details", "prev_hash"),
                      row[1:], strict=True))
    fields["details"] = {**json.loads(fields["details"]), "verdict": "fail"}  # it said pass
    conn.execute("UPDATE events SET details = ?, hash = ? WHERE id = ?",
                 (stored_details(fields["details"]), event_hash(fields), row[0]))
    conn.close()
    report = await check(db)
    assert report.broken is not None, report
    assert (report.broken.event_id, report.broken.problem) == (row[0], "edited")
    assert "the last event was replaced" in report.broken.detail


# ---------------------------------------------------------------- single-purpose fixtures
def test_a_failure_outranks_a_could_not_check_in_either_order() -> None:
    failed = Finding("cmdline", "fail", "forbidden --enable-ddtree present")
    unknown = could_not_check("health", "no SSH answer within 5 s")
    assert verdict_of([failed, unknown]) == "fail"
    assert verdict_of([unknown, failed]) == "fail"
    assert verdict_of([unknown]) == "error"


def test_a_check_event_flattens_details_and_prefixes_only_names_it_already_uses() -> None:
    finding = Finding("file:x.py", "fail", "differs", None, {"live_sha256": "ab12", "summary": "s", "next_step": "n"})
    event = finding.to_event()
    assert event["live_sha256"] == "ab12" and "details" not in event
    assert (event["summary"], event["detail_summary"], event["detail_next_step"]) == ("differs", "s", "n")
    assert "next_step" not in event  # the finding has none: the detail does not pose as one


async def test_a_plan_past_its_expiry_is_refused_and_one_before_it_is_approved(tmp_path: Path) -> None:
    """Two plans alike but for their expiry time, set on the clock the check reads (time.time())."""
    store = AuditStore.open(tmp_path / "a.db")
    rules = Approvals(approvers=["U2"])
    for plan_id in ("op-past", "op-future"):
        await approvals.create(store, plan_id=plan_id, operation="restore", host="ct129", requested_by="slack:U1",
                               plan_hash="h1", details={}, approvals=rules)
    now = time.time()
    for plan_id, expires_at in (("op-past", now - 1), ("op-future", now + 600)):
        await store.write(lambda db, plan_id=plan_id, expires_at=expires_at: db.execute(
            "UPDATE plans SET expires_at = ? WHERE id = ?", [expires_at, plan_id]))
    with pytest.raises(Refused, match="this plan expired at"):
        await approvals.decide(store, "op-past", "slack:U2", "approved", rules, user_id="U2")
    approved = await approvals.decide(store, "op-future", "slack:U2", "approved", rules, user_id="U2")
    assert approved.state == "approved"
    store.close()


def test_a_forbidden_flag_alone_fails_cmdline() -> None:
    """Every expected flag present, one forbidden flag present too: that alone fails."""
    service = Service.model_validate({"manager": "systemd", "unit": "sglang",
                                      "health_url": "http://127.0.0.1:30000/health",
                                      "expect_flags": ["--speculative-algorithm NEXTN"], "forbid_flags": ["--port"]})
    result = CommandResult("cat /proc/42/cmdline", 0, (RECORDED / "cmdline_nextn.bin").read_bytes(), 0.01)
    finding = cmdline_finding(service, 42, result)
    assert finding.status == "fail"
    assert finding.summary == "PID 42: forbidden --port present"
    assert finding.details == {"missing": [], "forbidden": ["--port"]}


# ---------------------------------------------------------------- found by bench/mutate.py
def real(argv: list[str]) -> CommandResult:
    """The real tool's output (stderr merged, as the host batch returns it)."""
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
    return CommandResult(" ".join(argv), done.returncode, done.stdout, 0.01)


def test_a_missing_live_file_is_told_apart_when_the_backup_path_contains_the_live_one(tmp_path: Path) -> None:
    """A backup dir that mirrors the live tree (``/root/bk/srv/app/x.py`` for ``/srv/app/x.py``): the hash
    line of the backup names the live path too, and must not be read as the live file's problem."""
    live = tmp_path / "srv" / "x.py"
    backup = tmp_path / "bk" / str(live).lstrip("/")
    backup.parent.mkdir(parents=True)
    backup.write_text("SPECULATIVE = 'NEXTN'\n")
    finding = parse_file_hash("x.py", "pre", str(backup), str(live), real(file_hash_argv(str(backup), str(live))))
    assert finding.status == "fail", finding.summary
    assert finding.summary == f"live file {live} is missing"


def test_an_unreadable_backup_copy_says_sha256sums_own_reason(tmp_path: Path) -> None:
    backup, live = tmp_path / "backup" / "x.py", tmp_path / "x.py"
    backup.mkdir(parents=True)  # a directory where the copy should be: sha256sum says "Is a directory"
    live.write_text("x\n")
    finding = parse_file_hash("x.py", "pre", str(backup), str(live), real(file_hash_argv(str(backup), str(live))))
    assert (finding.status, finding.summary) == ("error", f"backup copy {backup} unreadable: Is a directory")


def test_eleven_extra_files_show_ten_and_count_the_rest(tmp_path: Path) -> None:
    watch, backup_dir = tmp_path / "live", tmp_path / "backup"
    watch.mkdir()
    backup_dir.mkdir()
    names = [f"extra_{n:02d}.py" for n in range(11)]
    for name in ["spec_info.py", *names]:
        (watch / name).write_text("x\n")
    (backup_dir / "spec_info.py").write_text("x\n")
    backup = Backup(dir=str(backup_dir), files={"spec_info.py": str(watch / "spec_info.py")}, watch=[str(watch)])
    finding = extra_files_finding("pre", backup, parse_listing(real(listing_argv(listing_paths(backup)))))
    assert finding.status == "fail"
    shown = ", ".join(short_path(str(watch / name)) for name in names[:10])
    assert finding.summary == f"11 file(s) not in backup pre: {shown} and 1 more"
    assert finding.details["extra_files"] == [str(watch / name) for name in names]


def manager(kind: str) -> Service:
    return Service.model_validate({"manager": kind, "unit": "sglang", "health_url": "http://127.0.0.1:30000/health"})


def test_each_manager_is_asked_with_its_own_tool() -> None:
    systemd = service_state_argv(manager("systemd"))
    assert systemd[:3] == ["systemctl", "show", "sglang"] and systemd[3].startswith("--property=MainPID")
    assert service_state_argv(manager("supervisord")) == ["supervisorctl", "status", "sglang"]


def test_systemd_output_without_its_active_state_is_could_not_check() -> None:
    for output in (b"MainPID=4242\n", b"ActiveState=active\n"):
        finding, state = main_pid_finding(manager("systemd"), CommandResult("systemctl show", 0, output, 0.01))
        assert (finding.status, finding.summary, state) == ("error", "could not read the state of sglang", None)


def test_a_manager_that_printed_nothing_is_told_from_one_that_printed_nonsense() -> None:
    empty, _ = main_pid_finding(manager("systemd"), CommandResult("systemctl show", 0, b" \n", 0.01))
    assert empty.summary == "systemd printed nothing for sglang"
    odd, _ = main_pid_finding(manager("supervisord"), CommandResult("supervisorctl", 0, b"unix:///x refused\n", 0.01))
    assert odd.summary == "could not read the state of sglang"


def test_trim_keeps_three_quarters_head_one_quarter_tail_and_cuts_near_line_ends() -> None:
    assert trim("a" * 4000) == "a" * 4000
    assert trim("a" * 4001) == "a" * 3000 + "\n… [1 characters trimmed] …\n" + "a" * 1000
    assert trim("a" * 5000) == "a" * 3000 + "\n… [1000 characters trimmed] …\n" + "a" * 1000
    # a line end exactly half-way into the head is not "near": the head is cut at 3000, not 1501
    halfway = "a" * 1500 + "\n" + "b" * 3499
    assert trim(halfway).startswith("a" * 1500 + "\n" + "b" * 1499 + "\n… [1000 characters trimmed]")
    # a line end 400 characters into the 1000-character tail is near its start: the tail starts after it
    near = "c" * 4400 + "\n" + "d" * 599
    assert trim(near).endswith("characters trimmed] …\n" + "d" * 599)


def test_short_paths_keep_two_parts_once_there_are_more() -> None:
    assert short_path("/srv/app/x.py") == "/srv/app/x.py"
    assert short_path("/srv/app/lib/x.py") == "…/lib/x.py"


def test_ages_change_unit_at_a_minute_an_hour_and_a_day() -> None:
    assert [age_words(s) for s in (59, 60, 3599, 3600, 86399, 86400)] == [
        "59 s", "1 min", "59 min", "1 h 0 min", "23 h 59 min", "1 d 0 h"]


def test_six_files_newer_than_the_process_show_five_and_count_the_rest(tmp_path: Path) -> None:
    files = [tmp_path / f"mod_{n}.py" for n in range(6)]
    for n, path in enumerate(files):
        path.write_text("x\n")
        os.utime(path, (2_000_000_000 + n, 2_000_000_000 + n))
    listing = parse_listing(real(listing_argv([str(tmp_path)])))
    finding = stale_finding(ProcessStart(99, 1_900_000_000.0), [str(p) for p in files], listing,
                            [CommandResult("cat /proc/99/stat", 0, b"x", 0.01)])
    assert finding.status == "warn"
    assert f"6 file(s) changed after it: {', '.join(short_path(str(p)) for p in files[:5])} and 1 more;" \
        in finding.summary


def test_an_anchor_needs_an_id_and_twelve_hex_digits() -> None:
    assert parse_anchor("24:abcdef012345") == Anchor(24, "abcdef012345")
    for bad in ("24:abcdef01234", "x4:abcdef012345", "24:abcdef01234g", "24"):
        with pytest.raises(UsageError, match="bad anchor"):
            parse_anchor(bad)


async def test_a_click_on_the_plans_own_message_decides_and_one_elsewhere_is_refused(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    rules = Approvals(approvers=["U2"])
    for plan_id in ("op-1", "op-2"):
        await approvals.create(store, plan_id=plan_id, operation="restore", host="ct129", requested_by="slack:U1",
                               plan_hash="h1", details={}, approvals=rules, channel="C0OPS", message_ts="100.1")
    with pytest.raises(Refused, match="not decided: this plan was posted in another channel"):
        await approvals.decide(store, "op-1", "slack:U2", "approved", rules, user_id="U2",
                               clicked_on=ClickedOn("restore", "C0OTHER", "100.1"))
    decided = await approvals.decide(store, "op-2", "slack:U2", "approved", rules, user_id="U2",
                                     clicked_on=ClickedOn("restore", "C0OPS", "100.1"))
    assert decided.state == "approved"
    store.close()


async def test_only_an_approver_or_the_requester_may_reject(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    rules = Approvals(approvers=["U2"])
    for plan_id in ("op-1", "op-2"):
        await approvals.create(store, plan_id=plan_id, operation="restore", host="ct129", requested_by="slack:U1",
                               plan_hash="h1", details={}, approvals=rules)
    with pytest.raises(Refused, match="you are not an approver"):
        await approvals.decide(store, "op-1", "slack:U9", "rejected", rules, user_id="U9")
    assert (await approvals.decide(store, "op-1", "slack:U2", "rejected", rules, user_id="U2")).state == "rejected"
    assert (await approvals.decide(store, "op-2", "slack:U1", "rejected", rules, user_id="U1")).state == "rejected"
    store.close()


async def test_hold_for_reuses_only_its_own_lock(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    mine = await locks.hold_for(store, "ct129", "op-1", "restore", "slack:U1")  # free: taken
    assert (mine.operation_id, (await locks.holder_of(store, "ct129"))) == ("op-1", mine)
    assert await locks.hold_for(store, "ct129", "op-1", "restore", "slack:U1") == mine
    with pytest.raises(Locked, match="op-1"):
        await locks.hold_for(store, "ct129", "op-2", "restart", "slack:U9")
    store.close()
