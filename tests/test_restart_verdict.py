"""Restart without hosts: the probe parser on recorded replies, the watch fed with polls, the plan hash."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.restart_text import progress_line, render_restart_plan
from commands.checks.health import HttpOutcome
from commands.checks.probe import degenerate, probe_finding, probe_headers, reply_text
from commands.checks.service import parse_service_state
from commands.command_result import CommandResult
from commands.findings import Finding
from commands.inventory import Host, Probe
from commands.restart.plan import PlanVoid, RestartPlan, ServiceSnapshot, restart_argv
from commands.restart.progress import ProgressSink
from commands.restart.verdict import restart_findings
from commands.restart.watch import Poll, RestartProgress, Watch

RECORDED = Path(__file__).parent / "recorded"
PROBE = Probe.model_validate({"url": "http://127.0.0.1:30000/v1/chat/completions", "timeout_s": 10, "expect": "OK",
                              "json": {"model": "default", "messages": [{"role": "user", "content": "Say OK"}]}})


def answered(name: str, status: int = 200, elapsed_s: float = 0.042) -> HttpOutcome:
    return HttpOutcome("POST http://127.0.0.1:30000/v1/chat/completions (from ct129, via SSH forward)", status,
                       (RECORDED / name).read_text(), elapsed_s)


def host(manager: str = "systemd", **service: object) -> Host:
    return Host.model_validate({
        "name": "ct129", "address": "10.1.230.172", "ssh": {},
        "service": {"manager": manager, "unit": "sglang", "health_url": "http://127.0.0.1:30000/health",
                    "expect_flags": ["--speculative-algorithm NEXTN"], "forbid_flags": ["--enable-ddtree"],
                    "ready_timeout_s": 60, "min_startup_s": 20,
                    "probe": PROBE.model_dump(by_alias=True), **service}})


BEFORE = ServiceSnapshot(300698, True, "active/running", "aaaa1111", 0, 111, "2026-05-22T10:00:00.000Z",
                         1779443400.0, "python3 -m sglang.launch_server --enable-ddtree")


def plan(**service: object) -> RestartPlan:
    return RestartPlan("op-test", host(**service), BEFORE, created_at="2026-05-22T10:01:00Z")


# -- probe ---------------------------------------------------------------------------------

def test_a_real_ok_reply_passes_with_latency_and_reply_as_evidence() -> None:
    finding = probe_finding(PROBE, answered("probe_chat_ok.json"))
    assert finding.status == "pass"
    assert finding.summary == "answered in 42 ms: 'OK', contains 'OK'"
    assert finding.evidence is not None
    assert "POST http://127.0.0.1:30000/v1/chat/completions" in finding.evidence.command
    assert '"Say OK"' in finding.evidence.command
    assert "reply: 'OK'" in finding.evidence.output


@pytest.mark.parametrize(("recorded", "words"), [
    ("probe_chat_bangs.json", "one character repeated: '!' 8 times"),
    ("probe_chat_empty.json", "empty reply"),
    ("probe_chat_low_variety.json", "very low character variety: 2 distinct characters in 16"),
])
def test_a_degenerate_reply_fails_although_health_said_200(recorded: str, words: str) -> None:
    finding = probe_finding(PROBE, answered(recorded))
    assert finding.status == "fail"
    assert finding.summary == f"health answers 200 but the real reply is degenerate: {words}"


def test_a_timeout_is_a_failed_real_request() -> None:
    outcome = HttpOutcome("POST http://x/v1/chat/completions", None, "", 10.0, "no answer within 10 s")
    finding = probe_finding(PROBE, outcome)
    assert (finding.status, finding.summary) == ("fail", "health answers 200 but a real request failed: "
                                                         "no answer within 10 s")
    assert finding.evidence is not None and finding.evidence.exit_status is None


def test_non_2xx_fails_and_missing_expect_fails() -> None:
    assert probe_finding(PROBE, answered("probe_error_503.json", status=503)).summary.endswith("got HTTP 503")
    without_ok = PROBE.model_copy(update={"expect": "pong"})
    finding = probe_finding(without_ok, answered("probe_chat_ok.json"))
    assert finding.status == "fail" and "lacks 'pong'" in finding.summary


def test_reply_text_reads_chat_and_text_completions_else_the_body() -> None:
    assert reply_text((RECORDED / "probe_completion_text.json").read_text()) == " OK, the server is up."
    assert reply_text("plain words") == "plain words"
    assert degenerate("OK") is None and degenerate("K") is None
    assert degenerate("the the the the the the the") == "one word repeated: 'the' 7 times"
    assert degenerate("The capital of France is Paris.") is None


def test_probe_headers_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = PROBE.model_copy(update={"headers": {"Authorization": "Bearer ${LAB_KEY}"}})
    monkeypatch.delenv("LAB_KEY", raising=False)
    assert probe_headers(probe) == ({"Authorization": "Bearer "}, ["LAB_KEY"])
    monkeypatch.setenv("LAB_KEY", "sk-secret-123456789012")
    assert probe_headers(probe) == ({"Authorization": "Bearer sk-secret-123456789012"}, [])


# -- plan --------------------------------------------------------------------------------

def test_plan_hash_is_stable_and_bound_to_state_and_inventory() -> None:
    first, again = plan(), plan()
    assert first.plan_hash == again.plan_hash and len(first.plan_hash) == 64
    moved = RestartPlan("op-test", host(), ServiceSnapshot(**{**BEFORE.__dict__, "main_pid": 1}))
    assert moved.plan_hash != first.plan_hash
    assert plan(forbid_flags=[]).plan_hash != first.plan_hash
    rebuilt = RestartPlan.from_json(first.to_json(), host())
    assert rebuilt.plan_hash == first.plan_hash and rebuilt.before == BEFORE
    with pytest.raises(PlanVoid, match="inventory entry of ct129 changed"):
        RestartPlan.from_json(first.to_json(), host(ready_timeout_s=5))


def test_restart_command_is_an_argv_per_manager() -> None:
    assert restart_argv(host().service) == ["systemctl", "restart", "sglang"]  # type: ignore[arg-type]
    supervised = host("supervisord", supervisor_config="/etc/supervisor/supervisord.conf").service
    assert restart_argv(supervised) == ["supervisorctl", "-c", "/etc/supervisor/supervisord.conf",  # type: ignore[arg-type]
                                        "restart", "sglang"]
    text = render_restart_plan(plan())
    assert "will run   systemctl restart sglang" in text and "a NEW main PID and InvocationID" in text


# -- the watch ---------------------------------------------------------------------------

def show(pid: int, invocation: str, state: str = "active", restarts: int = 0) -> CommandResult:
    text = (f"MainPID={pid}\nActiveState={state}\nSubState=running\nInvocationID={invocation}\n"
            f"NRestarts={restarts}\nExecMainStartTimestampMonotonic=222\n")
    return CommandResult("systemctl show sglang --property=…", 0, text.encode(), 0.004)


def cmdline(*args: str) -> CommandResult:
    return CommandResult("cat /proc/N/cmdline", 0, "\0".join(args).encode() + b"\0", 0.002)


GOOD = ("python3", "-m", "sglang.launch_server", "--speculative-algorithm", "NEXTN")
BAD = (*GOOD, "--enable-ddtree")


def feed(watch: Watch, at: float, pid: int, invocation: str, health: int | None, args: tuple[str, ...] | None = None,
         state: str = "active", restarts: int = 0) -> None:
    result = show(pid, invocation, state, restarts)
    service = watch.service
    outcome = HttpOutcome("GET http://127.0.0.1:30000/health", health, "ok" if health == 200 else "", 0.003,
                          "" if health else "no answer within 2 s")
    watch.observe(Poll(at, result, parse_service_state(service, result), outcome,
                       pid if args is not None else None, cmdline(*args) if args is not None else None))


def sent(p: RestartPlan) -> Watch:
    watch = Watch(p.service, p.before, command="systemctl restart sglang", command_state="running")
    return watch


def statuses(findings: list[Finding]) -> dict[str, str]:
    return {finding.name: finding.status for finding in findings}


def test_slow_start_is_ready_at_the_first_all_green_poll_not_before() -> None:
    p = plan(min_startup_s=0)
    watch = sent(p)
    watch.command_done(CommandResult("systemctl restart sglang", 0, b"", 0.05), 0.05)
    feed(watch, 0.3, 302221, "bbbb2222", None, GOOD)
    assert watch.cmdline_wanted() is None and watch.ready_s is None
    feed(watch, 4.0, 302221, "bbbb2222", 503)
    feed(watch, 8.1, 302221, "bbbb2222", 200)
    assert watch.ready_s == 8.1
    progress = watch.progress("ct129", "op", "waiting", 8.1)
    assert progress_line(progress) == ("  8.1 s · restart exit 0 ✓ · PID 300698 → 302221 ✓ · health 200 ✓ · "
                                       "cmdline ✓ · ready after 8.10 s")
    probe = probe_finding(PROBE, answered("probe_chat_ok.json"))
    found = restart_findings(p, watch, probe, 0.25)
    assert set(statuses(found).values()) == {"pass"}
    assert found[1].summary.startswith("PID 300698 → 302221, InvocationID aaaa1111… → bbbb2222…")


def test_too_fast_fails_without_a_probe_and_warns_with_a_passing_one() -> None:
    p = plan()  # min_startup_s 20
    watch = sent(p)
    watch.command_done(CommandResult("systemctl restart sglang", 0, b"", 0.05), 0.05)
    feed(watch, 0.3, 302221, "bbbb2222", 200, GOOD)
    assert watch.ready_s == 0.3
    passed = probe_finding(PROBE, answered("probe_chat_ok.json"))
    warned = restart_findings(p, watch, passed, 0.25)[-1]
    assert warned.status == "warn" and "came back in 0.3 s: too fast for a real restart" in warned.summary
    failed = restart_findings(p.__class__(p.operation_id, host(probe=None), BEFORE), watch, None, 0.25)[-1]
    assert failed.status == "fail" and "nothing but health vouches for it" in failed.summary


def test_unchanged_pid_with_health_200_is_a_restart_that_never_took_effect() -> None:
    p = plan()
    watch = sent(p)
    watch.command_done(CommandResult("systemctl restart sglang", 0, b"", 0.05), 0.05)
    for at in (0.3, 30.0, 60.0):
        feed(watch, at, 300698, "aaaa1111", 200)
    found = {finding.name: finding for finding in restart_findings(p, watch, None, 0.25)}
    assert found["main-pid"].status == "fail"
    assert found["main-pid"].summary == ("PID 300698 unchanged after 60.0 s (although `systemctl restart sglang` "
                                         "exited 0): the restart never took effect")
    assert found["health"].status == "warn" and "from the old process" in found["health"].summary
    assert found["probe"].status == "error" and found["ready-time"].status == "fail"


def test_a_pid_that_changes_twice_is_a_crash_loop_with_the_count() -> None:
    p = plan()
    watch = sent(p)
    watch.command_done(CommandResult("systemctl restart sglang", 0, b"", 0.05), 0.05)
    feed(watch, 0.3, 400001, "c1", 503, GOOD)
    feed(watch, 1.6, 0, "c1", None, state="activating", restarts=1)
    feed(watch, 2.7, 400002, "c2", 503, GOOD, restarts=1)
    feed(watch, 4.0, 400003, "c3", 503, GOOD, restarts=2)
    assert watch.crash_loop
    pid = restart_findings(p, watch, None, 0.25)[1]
    assert pid.status == "fail"
    assert pid.summary.startswith("crash loop: the main PID changed 3 times")
    assert "300698 → 400001 → 400002 → 400003; NRestarts 0 → 2" in pid.summary


def test_a_green_process_seen_dead_while_settling_is_dated_for_the_watch_to_wait_for_its_next_start() -> None:
    """The restart keeps watching settle_s from this moment (commands/restart/act.py): on a slow machine the fixed
    window after green could end between the crash and the next start, hiding the loop."""
    p = plan()
    watch = sent(p)
    watch.command_done(CommandResult("systemctl restart sglang", 0, b"", 0.05), 0.05)
    feed(watch, 1.2, 400001, "c1", 200, GOOD)
    feed(watch, 2.0, 400001, "c1", 200)
    assert watch.ready_s == 1.2 and watch.died_since() is None  # green and still the one running
    feed(watch, 4.1, 0, "c1", None, state="activating", restarts=1)
    feed(watch, 4.4, 0, "c1", None, state="activating", restarts=1)
    assert watch.died_since() == 4.1 and not watch.crash_loop


def test_health_200_with_a_forbidden_flag_is_the_old_launch_script() -> None:
    p = plan()
    watch = sent(p)
    watch.command_done(CommandResult("systemctl restart sglang", 0, b"Warning: The unit file, source configuration "
                                     b"file or drop-ins of sglang.service changed on disk. Run 'systemctl "
                                     b"daemon-reload' to reload units.\n", 0.05), 0.05)
    feed(watch, 0.3, 302221, "bbbb2222", 503, BAD)
    assert not watch.wrong_flags_final()  # read before health: maybe before its exec
    feed(watch, 25.0, 302221, "bbbb2222", 200, BAD)
    assert watch.wrong_flags_final() and watch.ready_s is None
    found = {finding.name: finding for finding in restart_findings(p, watch, None, 0.25)}
    assert found["cmdline"].summary.startswith("health answers 200 but --enable-ddtree is present in new PID "
                                               "302221: the old launch script is still in place")
    assert "daemon-reload" in found["cmdline"].summary
    assert found["restart-command"].status == "warn"


def test_no_exit_status_is_an_error_never_a_pass() -> None:
    p = plan()
    watch = sent(p)
    feed(watch, 0.1, 300698, "aaaa1111", 200)
    watch.link_lost("ct129: connection lost, no exit status for: systemctl restart sglang", 4.2)
    found = restart_findings(p, watch, None, 0.25)
    assert statuses(found) == {"restart-command": "error", "main-pid": "error", "health": "error",
                               "cmdline": "error", "probe": "error", "ready-time": "error"}
    assert "whether it ran is unknown" in found[0].summary


def test_a_host_that_cannot_be_reached_is_never_restarted_and_never_passes() -> None:
    p = plan()
    watch = Watch(p.service, p.before)
    watch.link_lost("ct129 (10.1.230.172:22): cannot connect: Connection refused", 0.0)
    found = restart_findings(p, watch, None, 0.25)
    assert set(statuses(found).values()) == {"error"}
    assert found[0].summary == "not sent: ct129 (10.1.230.172:22): cannot connect: Connection refused"
    assert found[-1].summary.startswith("not restarted: ")


async def test_progress_never_waits_for_a_slow_front_end_and_survives_a_failing_one() -> None:
    """The front-end is held busy by the test (no timing involved): states offered meanwhile are never
    waited for, only the newest is delivered once it is free, and its failure does not stop delivery."""
    p = plan()
    watch = sent(p)
    delivered: list[float] = []
    busy, free = asyncio.Event(), asyncio.Event()

    async def slow(progress: RestartProgress) -> None:
        delivered.append(progress.elapsed_s)
        busy.set()
        await free.wait()
        if len(delivered) == 1:
            raise RuntimeError("Slack said ratelimited")

    sink = ProgressSink(slow)
    for step in range(5):  # five state changes; the last four while the first call is still busy
        feed(watch, step / 10, 300698 + step, f"i{step}", 503)
        sink.offer(watch.progress("ct129", "op", "waiting", step / 10))  # returns at once: never waits
        if step == 0:
            async with asyncio.timeout(10):
                await busy.wait()
    assert delivered == [0.0]
    free.set()
    await sink.close()
    assert delivered == [0.0, 0.4]  # the first, then only the newest; the raise did not stop delivery
