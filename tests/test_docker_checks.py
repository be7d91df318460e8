"""Docker's checks on recorded output of the real main-pid step (``docker inspect`` on the host, the init's
children, the host's clock; Debian's docker.io 20.10): each state turns into the finding a person expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands.checks.check import HttpRequest, Read
from commands.checks.cmdline import CmdlineCheck
from commands.checks.docker import DockerHealthCheck, DockerMainPid, DockerStaleCheck
from commands.checks.docker_state import INSPECT_FORMAT, inspect_argv, parse_docker_state
from commands.checks.file_times import FILE_TIMES
from commands.checks.health import HttpOutcome
from commands.checks.managers import checks_for
from commands.checks.pid_read import MAIN_PID_READ
from commands.checks.service import agreed_pid
from commands.command_result import CommandResult
from commands.findings import Finding
from commands.inventory import Service, parse_inventory
from commands.verify.next_steps import next_step
from commands.verify.plan import VerifyPlan
from commands.vocabulary import CheckStatus, Operation

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str, exit_status: int = 0) -> CommandResult:
    return CommandResult("docker inspect …", exit_status, (RECORDED / name).read_bytes(), 0.01)


def docker_service(**extra: object) -> Service:
    return Service.model_validate({"manager": "docker", "container": "sglang",
                                   "health_url": "http://127.0.0.1:30000/health", **extra})


def main_pid(result: CommandResult, **extra: object) -> tuple[CheckStatus, str, dict[str, object]]:
    finding = DockerMainPid(docker_service(**extra)).parse(Read((result,)))
    return finding.status, finding.summary, finding.details


def test_docker_is_registered_with_its_own_main_pid_and_stale_classes() -> None:
    manager = checks_for(docker_service())
    assert (manager.main_pid, manager.stale, manager.cmdline) == (DockerMainPid, DockerStaleCheck, CmdlineCheck)


def test_inspect_runs_the_configured_cli_and_socket_and_asks_for_no_environment() -> None:
    service = docker_service(engine={"cli": "/usr/bin/docker", "host": "unix:///var/tmp/d/sock"})
    assert inspect_argv(service)[:7] == ["/usr/bin/docker", "-H", "unix:///var/tmp/d/sock", "inspect", "--type",
                                         "container", "--format"]
    assert inspect_argv(docker_service())[0] == "docker" and inspect_argv(service)[-1] == "sglang"
    # the environment may hold secrets; RestartCount is read only to name a crash loop (test_podman_checks.py)
    assert "Env" not in INSPECT_FORMAT and "Labels" not in INSPECT_FORMAT


def test_init_is_reported_and_its_one_child_is_the_main_pid() -> None:
    status, summary, details = main_pid(recorded("docker_state_init.txt"))
    assert status is CheckStatus.PASS
    assert "main PID 4318 (child of docker-init, PID 4304" in summary
    assert details["main_pid"] == 4318 and details["container_pid"] == 4304


def test_crash_loop_is_a_fail_that_names_restarting() -> None:
    status, summary, details = main_pid(recorded("docker_state_crash_loop.txt"))
    assert status is CheckStatus.FAIL
    assert "crash loop: Restarting: true, Running: true, Pid: 0, last exit code 1" in summary
    assert details["main_pid"] is None


def test_stopped_container_fails_with_its_exit_code() -> None:
    status, summary, _ = main_pid(recorded("docker_state_exited.txt"))
    assert status is CheckStatus.FAIL and "sglang is exited, exit code 137" in summary


def test_missing_container_is_a_fail_and_an_unreachable_engine_could_not_check() -> None:
    status, summary, _ = main_pid(recorded("docker_state_no_such.txt", exit_status=1))
    assert status is CheckStatus.FAIL and summary == ("no container sglang on this host (the engine says: "
                                                      "Error: No such object: nosuch)")
    down = CommandResult("docker inspect", 1, b"Cannot connect to the Docker daemon at unix:///x.sock. "
                         b"Is the docker daemon running?\nnow 1796154770.1\n", 0.01)
    status, summary, _ = main_pid(down)
    assert status is CheckStatus.ERROR and "Cannot connect to the Docker daemon" in summary


def test_young_container_warns_until_min_uptime_s() -> None:
    result = recorded("docker_state_plain.txt")
    state = parse_docker_state(result)
    assert state is not None and state.uptime_s is not None and state.service_pid == 17771
    status, summary, _ = main_pid(result, min_uptime_s=state.uptime_s + 5)
    assert status is CheckStatus.WARN and "not yet proven stable" in summary and "main PID 17771" in summary
    status, summary, _ = main_pid(result, min_uptime_s=0)
    assert status is CheckStatus.PASS and summary.startswith("sglang running, main PID 17771, up ")


def _with_children(children: str) -> CommandResult:
    text = (RECORDED / "docker_state_init.txt").read_text().replace("children: 4318 ", f"children: {children}")
    return CommandResult("docker inspect", 0, text.encode(), 0.01)


def test_init_with_no_child_fails_and_with_several_cannot_tell() -> None:
    status, summary, _ = main_pid(_with_children(""))
    assert status is CheckStatus.FAIL and "runs with no child" in summary
    status, summary, _ = main_pid(_with_children("4318 4400 "))
    assert status is CheckStatus.ERROR and "2 children (4318, 4400)" in summary


def test_cmdline_and_stale_read_the_child_the_host_script_kept() -> None:
    service = docker_service()
    state = recorded("docker_state_init.txt")
    kept = CommandResult("echo main PID", 0, b"4318", 0.0)
    assert agreed_pid(service, Read((), {"main-pid": (state,), MAIN_PID_READ: (kept,)})) == (4318, "")
    other = CommandResult("echo main PID", 0, b"4304", 0.0)
    pid, why = agreed_pid(service, Read((), {"main-pid": (state,), MAIN_PID_READ: (other,)}))
    assert pid is None and "4304" in why


@pytest.mark.parametrize(("mtime", "status"), [("1796154600.0", CheckStatus.PASS),
                                                ("1796154700.0", CheckStatus.WARN)])
def test_stale_process_is_judged_against_started_at(mtime: str, status: CheckStatus) -> None:
    """StartedAt 19:50:15.04Z (1796154615.04): a watched file written later is a stale process."""
    service = docker_service()
    listing = CommandResult("find", 0, f"{mtime}\t/srv/app/model.py\0".encode(), 0.01)
    check = DockerStaleCheck(service, ("/srv/app/model.py",))
    assert check.steps() == []
    needed = {"main-pid": (recorded("docker_state_init.txt"),),
              MAIN_PID_READ: (CommandResult("echo main PID", 0, b"4318", 0.0),), FILE_TIMES: (listing,)}
    finding = check.parse(Read((), needed))
    assert finding.status is status, finding.summary
    assert finding.summary.startswith("PID 4318 started 19:50:15 UTC")
    assert finding.details["process_started_at"].startswith("2026-12-01T19:50:15")


def health_request(state_text: str, url: str = "http://127.0.0.1:30005/health") -> object:
    read = Read((), {"main-pid": (CommandResult("docker inspect", 0, state_text.encode(), 0.01),)})
    return DockerHealthCheck(url).request_from(read)


BRIDGE = (RECORDED / "docker_state_bridge.txt").read_text()


def test_host_network_health_is_the_url_as_written_sent_at_the_start() -> None:
    assert checks_for(docker_service()).health is DockerHealthCheck
    assert health_request((RECORDED / "docker_state_init.txt").read_text()) is None


def test_bridge_network_health_goes_to_the_containers_address_from_inspect() -> None:
    request = health_request(BRIDGE)
    assert isinstance(request, HttpRequest) and request.url == "http://10.231.227.194:30005/health"
    # an address that is not the host's loopback is as written; so is a port published on the host
    assert health_request(BRIDGE, "http://10.1.2.3:30005/health") is None
    published = BRIDGE.replace("\n{}\n", '\n{"30005/tcp":[{"HostIp":"","HostPort":"30005"}]}\n')
    assert health_request(published) is None


def test_bridge_container_without_an_address_fails_health_without_a_request() -> None:
    finding = health_request(BRIDGE.replace('"IPAddress":"10.231.227.194"', '"IPAddress":""'))
    assert isinstance(finding, Finding) and finding.status is CheckStatus.FAIL
    assert "no address on its network (pbnet)" in finding.summary


def test_health_answer_from_the_container_address_says_so() -> None:
    outcome = HttpOutcome("GET http://10.231.227.194:30005/health", 200, "ok", 0.01)
    finding = DockerHealthCheck("http://127.0.0.1:30005/health").parse(outcome)
    assert finding.status is CheckStatus.PASS
    assert finding.summary.endswith("(at the container's address: GET http://10.231.227.194:30005/health)")


@pytest.mark.parametrize(("name", "status", "operation", "advice"), [
    ("main-pid", CheckStatus.FAIL, Operation.RESTART, "sglang is not running"),
    ("main-pid", CheckStatus.WARN, Operation.VERIFY, "sglang has not been up for min_uptime_s yet: wait, then"),
    ("cmdline", CheckStatus.FAIL, Operation.RESTART, "fix the launch config"),
    ("health", CheckStatus.FAIL, Operation.RESTART, "read the service's log"),
])
def test_next_steps_of_a_container_offer_its_restart(name: str, status: CheckStatus, operation: Operation,
                                                     advice: str) -> None:
    host = parse_inventory("hosts:\n  ct129:\n    address: 10.0.0.1\n    service: {manager: docker, container: "
                           "sglang, health_url: 'http://127.0.0.1:30000/health'}\n", "i.yml").host("ct129")
    step = next_step(Finding(name, status, "x"), VerifyPlan.for_host(host, None))
    assert step is not None and step.operation is operation and step.args == ("ct129",)
    assert step.advice.startswith(advice)


def test_next_steps_never_offer_a_compose_restart_proofbot_would_refuse() -> None:
    """Without compose_file docker-compose 1.29 cannot restart the service: the hint says how, by hand."""
    host = parse_inventory("hosts:\n  ct129:\n    address: 10.0.0.1\n    service: {manager: compose, project: llm, "
                           "service: sglang, health_url: 'http://127.0.0.1:30000/health'}\n", "i.yml").host("ct129")
    step = next_step(Finding("health", CheckStatus.FAIL, "x"), VerifyPlan.for_host(host, None))
    assert step is not None and step.operation is Operation.VERIFY
    assert step.advice.startswith("restart it on the host (docker-compose -p llm restart sglang; proofbot needs")
