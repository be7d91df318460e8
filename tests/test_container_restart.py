"""Restart of a container without an engine: the proof (commands/restart/runs.py, container_verdict.py) fed with
the main-pid step's output as the host prints it (``docker inspect``'s lines, the init's children, the host's
clock, and for compose the labels' ``docker ps`` line), recorded from Docker 20.10 and varied per case."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from commands.checks.compose import compose_main_pid_finding, parse_found
from commands.checks.health import HttpOutcome
from commands.checks.service import parse_service_state
from commands.command_result import CommandResult
from commands.errors import UsageError
from commands.findings import Finding
from commands.inventory import Host
from commands.restart.act import changes_since
from commands.restart.container import ContainerLook, look_of
from commands.restart.plan import RestartPlan, ServiceSnapshot, restart_argv
from commands.restart.runs import ContainerRuns
from commands.restart.verdict import restart_findings
from commands.restart.watch import Poll, Watch
from commands.vocabulary import CheckStatus

RECORDED = Path(__file__).parent / "recorded"
FLAG = "--speculative-algorithm NEXTN"
T0 = 1796155000.25  # the planned run's StartedAt
ASKED = T0 + 100.0  # the host's clock just before the restart command
ID_A, ID_B = "a" * 64, "b" * 64


def host(manager: str = "docker", **service: object) -> Host:
    naming: dict[str, object] = {"container": "sglang"} if manager == "docker" else {
        "project": "llm", "service": "sglang", "compose_file": "/srv/llm/docker-compose.yml"}
    return Host.model_validate({
        "name": "ct129", "address": "10.1.230.172", "ssh": {},
        "service": {"manager": manager, **naming, "health_url": "http://127.0.0.1:30000/health",
                    "expect_flags": [FLAG], "ready_timeout_s": 60, "min_uptime_s": 5,
                    "engine": {"cli": "/usr/bin/docker", "host": "unix:///run/d.sock"}, **service}})


def rfc3339(epoch: float) -> str:
    """As Docker writes StartedAt: nanoseconds, Z."""
    whole = datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{round((epoch % 1) * 1e9):09d}Z"


def step(status: str = "running", *, started: float = T0, now: float, pid: int = 4304, child: int | None = 4318,
         exit_code: int = 0, container: str | None = None, found: str | None = None) -> CommandResult:
    """The main-pid step's output, line for line as tests/recorded/docker_state_init.txt (Docker 20.10)."""
    running = status in ("running", "restarting", "paused")
    state = {"Status": status, "Running": running, "Paused": status == "paused",
             "Restarting": status == "restarting", "OOMKilled": False, "Dead": False, "Pid": pid if running
             and status != "restarting" else 0, "ExitCode": exit_code, "Error": "", "StartedAt": rfc3339(started),
             "FinishedAt": "0001-01-01T00:00:00Z"}
    lines = [json.dumps(state, separators=(",", ":")), "true", '"host"', "{}", "{}", '"no"', "0"]
    if state["Pid"]:
        lines.append(f"init {pid} docker-init children: {child if child else ''} ")
    lines.append(f"now {now:.9f}")
    if container is not None or found is not None:
        lines.insert(0, f"compose ps exit 0, containers: {found if found is not None else container}")
    return CommandResult("docker inspect …", 0 if status != "missing" else 1, "\n".join(lines).encode(), 0.02)


def before(manager: str = "docker", container: str | None = None) -> ServiceSnapshot:
    state = step(now=ASKED - 1, container=container)
    service = host(manager).service
    assert service is not None
    parsed = parse_service_state(service, state)
    assert parsed is not None
    return ServiceSnapshot.of(parsed, T0, f"python3 server.py {FLAG}", look_of(service, state))


def watching(manager: str = "docker", container: str | None = None, command_exit: int = 0) -> tuple[RestartPlan,
                                                                                                     Watch]:
    plan = RestartPlan("op-ct", host(manager), before(manager, container), created_at="2026-12-01T20:00:00Z")
    watch = Watch(plan.service, plan.before, command="docker restart sglang")
    watch.runs = ContainerRuns(plan.service.min_uptime_s, plan.before.container_started, plan.before.container_id,
                               requested_at=ASKED)
    watch.command_done(CommandResult(watch.command, command_exit, b"sglang\n", 0.6), 0.6)
    return plan, watch


def poll(watch: Watch, at: float, result: CommandResult, health: int | None = 200) -> None:
    service = watch.service
    state = parse_service_state(service, result)
    pid = state.main_pid if state else None
    cmdline = CommandResult(f"cat /proc/{pid}/cmdline", 0, f"python3\0server.py\0{FLAG.replace(' ', chr(0))}\0"
                            .encode(), 0.001) if pid else None
    outcome = HttpOutcome("GET http://127.0.0.1:30000/health", health, "ok" if health else "",
                          0.01, "" if health else "connection refused")
    watch.observe(Poll(at, result, state, outcome, pid, cmdline, look_of(service, result)))


def judged(plan: RestartPlan, watch: Watch) -> dict[str, Finding]:
    return {finding.name: finding for finding in restart_findings(plan, watch, None, 0.25)}


def test_a_new_started_at_and_pid_held_for_min_uptime_is_proven() -> None:
    plan, watch = watching()
    new = ASKED + 0.8
    poll(watch, 0.3, step("exited", now=ASKED + 0.3, exit_code=0), health=None)  # the old run, stopped
    poll(watch, 0.9, step(started=new, pid=5001, child=None, now=ASKED + 0.9), health=None)  # init, no child yet
    poll(watch, 1.2, step(started=new, pid=5001, child=5010, now=ASKED + 1.2))
    assert watch.ready_s is None  # up 0.4 s: not yet min_uptime_s (5 s), however green the rest
    poll(watch, 5.9, step(started=new, pid=5001, child=5010, now=ASKED + 5.9))
    assert watch.ready_s == 5.9
    findings = judged(plan, watch)
    main = findings["main-pid"]
    assert main.status is CheckStatus.PASS, main.summary
    assert main.summary.startswith(f"new run: StartedAt {'2026-12-01T'}")
    assert "PID 4318 → StartedAt" in main.summary
    assert "PID 5010; up 5.1 s (min_uptime_s 5), Running and not Restarting in every poll of it" in main.summary
    assert main.details["new_pids"] == [5010] and main.details["exit_codes"] == []
    assert main.evidence is not None and "StartedAt" in main.evidence.output and "ExitCode" in main.evidence.output
    assert findings["ready-time"].status is CheckStatus.PASS
    assert "RestartCount" not in json.dumps(main.details)


def test_the_uptime_still_due_is_read_from_the_engines_clock() -> None:
    """What the act times its proving poll by: min_uptime_s less the run's uptime at the last read."""
    _, watch = watching()
    poll(watch, 0.5, step(started=ASKED + 0.4, pid=5001, child=None, now=ASKED + 0.5))
    assert watch.uptime_due() is None  # no service PID yet: not up
    poll(watch, 1.0, step(started=ASKED + 0.4, pid=5001, child=5010, now=ASKED + 1.5))
    assert watch.uptime_due() == pytest.approx(5 - 1.1)
    poll(watch, 6.0, step(started=ASKED + 0.4, pid=5001, child=5010, now=ASKED + 6.0))
    assert watch.uptime_due() is None and watch.ready_s == 6.0


def test_a_run_that_started_before_the_request_is_not_the_restart() -> None:
    """StartedAt later than the planned run but not than the request: someone else's start, never proof."""
    plan, watch = watching()
    for at in (0.5, 1.0, 6.0):
        poll(watch, at, step(started=ASKED - 0.5, pid=4400, child=4410, now=ASKED + at))
    assert watch.ready_s is None
    main = judged(plan, watch)["main-pid"]
    assert main.status is CheckStatus.FAIL and main.summary.startswith("no run started after the request")
    assert "the restart never took effect" in main.summary


def test_an_unchanged_container_is_never_proven_even_with_health_200() -> None:
    plan, watch = watching()
    for at in (0.5, 3.0, 9.0):
        poll(watch, at, step(now=ASKED + at))
    findings = judged(plan, watch)
    assert findings["main-pid"].status is CheckStatus.FAIL
    assert "still StartedAt" in findings["main-pid"].summary and "PID 4318, running" in findings["main-pid"].summary
    assert findings["health"].status is CheckStatus.WARN  # 200 from the old run proves nothing
    assert findings["ready-time"].status is CheckStatus.FAIL


def test_a_crash_loop_is_named_with_the_exit_codes_seen_never_restarted() -> None:
    """Docker between runs: Running true, Restarting true, Pid 0; each run a new StartedAt, ExitCode 3."""
    plan, watch = watching()
    first, second = ASKED + 0.7, ASKED + 1.9
    poll(watch, 0.8, step(started=first, pid=5001, child=5010, now=ASKED + 0.8))
    poll(watch, 1.1, step("restarting", started=first, exit_code=3, now=ASKED + 1.1), health=None)
    assert watch.crash_loop and watch.crash_loop_since() == 1.1
    poll(watch, 2.0, step(started=second, pid=5101, child=5110, now=ASKED + 2.0))
    poll(watch, 2.4, step("restarting", started=second, exit_code=3, now=ASKED + 2.4), health=None)
    findings = judged(plan, watch)
    main = findings["main-pid"]
    assert main.status is CheckStatus.FAIL
    assert "sglang is in a crash loop: 2 run(s) since the restart" in main.summary
    assert "exit codes seen: 3, 3" in main.summary and "not restarted" in main.summary
    assert main.details["exit_codes"] == [3, 3]
    ready = findings["ready-time"]
    assert ready.status is CheckStatus.FAIL and "crash loop" in ready.summary


def test_a_run_never_seen_up_between_restarts_still_counts_in_the_loop() -> None:
    """Runs shorter than a poll: only `restarting` is seen, each with its own StartedAt."""
    plan, watch = watching()
    poll(watch, 0.5, step("restarting", started=ASKED + 0.3, exit_code=1, now=ASKED + 0.5), health=None)
    assert watch.crash_loop
    poll(watch, 1.0, step("restarting", started=ASKED + 0.8, exit_code=1, now=ASKED + 1.0), health=None)
    main = judged(plan, watch)["main-pid"]
    assert main.status is CheckStatus.FAIL and "exit codes seen: 1, 1" in main.summary


def test_a_container_that_never_came_back_is_not_proven() -> None:
    """It started (a new StartedAt) and exited; no restart policy: it will not come back by itself."""
    plan, watch = watching()
    poll(watch, 0.9, step(started=ASKED + 0.8, pid=5001, child=5010, now=ASKED + 0.9), health=None)
    poll(watch, 1.3, step("exited", started=ASKED + 0.8, exit_code=1, now=ASKED + 1.3), health=None)
    assert not watch.crash_loop and watch.gone_since() == 1.3
    poll(watch, 4.5, step("exited", started=ASKED + 0.8, exit_code=1, now=ASKED + 4.5), health=None)
    findings = judged(plan, watch)
    main = findings["main-pid"]
    assert main.status is CheckStatus.FAIL
    assert "was seen exited, exit code 1 at +1.3 s" in main.summary and "it never came back" in main.summary
    assert findings["ready-time"].status is CheckStatus.FAIL
    assert "its engine does not restart it" in findings["ready-time"].summary


def test_a_run_stopped_between_two_runs_of_its_restart_policy_is_not_gone_but_a_crash_loop() -> None:
    """Podman 4.3 reads `stopped, Pid 0` (no Restarting) until it starts the next run at once: its policy will
    start it again, so it never "never came back"; the next run makes it a crash loop with both exit codes."""
    plan, watch = watching()

    def stopped(at: float, started: float) -> CommandResult:
        result = step("exited", started=started, exit_code=3, now=ASKED + at)
        text = result.text.replace('"exited"', '"stopped"').replace('"no"', '"always"')
        return CommandResult(result.command, 0, text.encode(), result.duration_s)

    poll(watch, 0.9, step(started=ASKED + 0.8, pid=5001, child=5010, now=ASKED + 0.9), health=None)
    poll(watch, 1.3, stopped(1.3, ASKED + 0.8), health=None)
    assert not watch.crash_loop and watch.gone_since() is None
    poll(watch, 4.5, stopped(4.5, ASKED + 0.8), health=None)  # a slow engine: still not gone
    assert watch.gone_since() is None
    poll(watch, 4.9, stopped(4.9, ASKED + 4.6), health=None)
    main = judged(plan, watch)["main-pid"]
    assert main.status is CheckStatus.FAIL and "exit codes seen: 3, 3" in main.summary, main.summary


def test_up_but_not_for_min_uptime_by_the_deadline_is_not_proven() -> None:
    plan, watch = watching()
    poll(watch, 58.0, step(started=ASKED + 56.0, pid=5001, child=5010, now=ASKED + 58.0))
    findings = judged(plan, watch)
    assert findings["main-pid"].status is CheckStatus.FAIL
    assert "was not up 5 s (min_uptime_s)" in findings["main-pid"].summary
    assert "the new run up 5 s (min_uptime_s)" in findings["ready-time"].summary


def test_paused_after_start_is_down_and_never_stable() -> None:
    _, watch = watching()
    new = ASKED + 0.5
    poll(watch, 1.0, step(started=new, pid=5001, child=5010, now=ASKED + 1.0))
    poll(watch, 2.0, step("paused", started=new, pid=5001, child=5010, now=ASKED + 2.0))
    poll(watch, 7.0, step(started=new, pid=5001, child=5010, now=ASKED + 7.0))
    assert watch.ready_s is None and watch.runs is not None and watch.runs.runs[0].down.startswith("paused")


def test_a_failed_restart_command_is_named() -> None:
    plan, watch = watching(command_exit=1)
    poll(watch, 0.7, step(now=ASKED + 0.7))
    findings = judged(plan, watch)
    assert findings["restart-command"].status is CheckStatus.FAIL
    assert "exited 1" in findings["main-pid"].summary and findings["main-pid"].status is CheckStatus.FAIL


def test_a_compose_recreate_is_followed_and_reported() -> None:
    plan, watch = watching("compose", container=ID_A)
    assert plan.before.container_id == ID_A
    new = ASKED + 1.0
    poll(watch, 1.5, step(started=new, pid=6001, child=6010, now=ASKED + 1.5, container=ID_B))
    poll(watch, 7.0, step(started=new, pid=6001, child=6010, now=ASKED + 7.0, container=ID_B))
    main = judged(plan, watch)["main-pid"]
    assert main.status is CheckStatus.PASS
    assert main.summary.endswith(f"; container recreated: {ID_A[:12]} → {ID_B[:12]} (followed by its labels)")
    assert main.details["container_ids"] == [ID_B] and main.details["recreated"] == [ID_A, ID_B]


def test_a_recreate_during_the_watch_is_not_a_crash_loop() -> None:
    """The restarted container A stops (someone ran `up --force-recreate`), B starts: two runs, two containers."""
    plan, watch = watching("compose", container=ID_A)
    poll(watch, 1.0, step(started=ASKED + 0.5, pid=6001, child=6010, now=ASKED + 1.0, container=ID_A))
    poll(watch, 2.0, step("exited", started=ASKED + 0.5, exit_code=0, now=ASKED + 2.0, container=ID_A), health=None)
    poll(watch, 3.0, step(started=ASKED + 2.5, pid=7001, child=7010, now=ASKED + 3.0, container=ID_B))
    poll(watch, 8.0, step(started=ASKED + 2.5, pid=7001, child=7010, now=ASKED + 8.0, container=ID_B))
    assert not watch.crash_loop and watch.ready_s == 8.0
    main = judged(plan, watch)["main-pid"]
    assert main.status is CheckStatus.PASS and "PID 7010" in main.summary and "container recreated" in main.summary


def test_two_containers_of_one_compose_service_are_unreadable_not_either() -> None:
    _, watch = watching("compose", container=ID_A)
    poll(watch, 1.0, step(started=ASKED + 0.5, pid=6001, child=6010, now=ASKED + 1.0, found=f"{ID_A} {ID_B}"))
    assert watch.last is not None and watch.last.look is None and watch.runs is not None and not watch.runs.runs


@pytest.mark.parametrize(("found", "status", "words"), [
    ("", CheckStatus.FAIL, "no container of compose service llm/sglang on this host (none labelled "
     "com.docker.compose.project=llm, com.docker.compose.service=sglang)"),
    (f"{ID_A} {ID_B}", CheckStatus.ERROR, f"2 containers of compose service llm/sglang ({ID_A[:12]}, {ID_B[:12]})"),
    (ID_A, CheckStatus.PASS, f"(container {ID_A[:12]})"),
])
def test_compose_main_pid_finds_its_container_by_the_labels(found: str, status: CheckStatus, words: str) -> None:
    service = host("compose", min_uptime_s=1).service
    assert service is not None
    result = step(now=T0 + 60, found=found) if found == ID_A else CommandResult(
        "docker ps …", 1, f"compose ps exit 0, containers: {found}\nnow {T0 + 60}".encode(), 0.02)
    finding = compose_main_pid_finding(service, result)
    assert finding.status is status and words in finding.summary, finding.summary


def test_compose_ps_that_fails_says_the_engines_words() -> None:
    service = host("compose").service
    assert service is not None
    text = ("Cannot connect to the Docker daemon at unix:///run/d.sock. Is the docker daemon running?\n"
            "compose ps exit 1, containers: \nnow 1796155096.5")
    finding = compose_main_pid_finding(service, CommandResult("docker ps …", 1, text.encode(), 0.01))
    assert finding.status is CheckStatus.ERROR and "Cannot connect to the Docker daemon" in finding.summary
    assert parse_found(CommandResult("x", 0, b"no such line", 0.0)) is None


def test_the_act_is_the_engines_argv_prefix_and_its_restart() -> None:
    assert restart_argv(host().service) == ["/usr/bin/docker", "-H", "unix:///run/d.sock", "restart",  # type: ignore
                                            "sglang"]
    assert restart_argv(host("compose").service) == [  # type: ignore[arg-type]
        "docker-compose", "-H", "unix:///run/d.sock", "-f", "/srv/llm/docker-compose.yml", "-p", "llm", "restart",
        "sglang"]
    with pytest.raises(UsageError, match="add compose_file"):
        restart_argv(host("compose", compose_file=None).service)  # type: ignore[arg-type]


def test_a_recreate_or_a_new_run_since_the_plan_voids_it() -> None:
    planned = before("compose", ID_A)
    recreated = ServiceSnapshot.of(parse_service_state(host("compose").service, step(container=ID_B, now=T0 + 9)),  # type: ignore
                                   T0, None, look_of(host("compose").service, step(container=ID_B, now=T0 + 9)))  # type: ignore
    assert changes_since(planned, recreated) == [f"container {ID_A[:12]} → {ID_B[:12]} (recreated)"]
    again = step(started=T0 + 50, now=T0 + 60)
    service = host().service
    assert service is not None
    state = parse_service_state(service, again)
    assert state is not None
    words = changes_since(before(), ServiceSnapshot.of(state, T0, None, look_of(service, again)))
    assert words == [f"the container started again at {rfc3339(T0 + 50)[:23]}Z"]


def test_the_recorded_crash_loop_reads_as_a_restarting_look() -> None:
    result = CommandResult("docker inspect …", 0, (RECORDED / "docker_state_crash_loop.txt").read_bytes(), 0.02)
    look = look_of(host().service, result)  # type: ignore[arg-type]
    assert look == ContainerLook("restarting", True, True, 0, None, 1, look.started_at if look else None,
                                 1796163239.331070180, None, "always")
    assert look is not None and not look.up


def test_the_plan_says_what_a_container_must_prove_and_what_will_run() -> None:
    from bot.restart_text import render_restart_plan

    plan, _ = watching()
    text = render_restart_plan(plan)
    assert "will run   /usr/bin/docker -H unix:///run/d.sock restart sglang" in text
    assert ("then prove a new StartedAt later than the request and a new PID > 0; running, not restarting, for 5 s "
            "(min_uptime_s)") in text
    assert "a NEW main PID" not in text and "RestartCount" not in text
