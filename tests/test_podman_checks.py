"""Podman's checks on recorded output of the real main-pid step (``podman inspect`` on the host, catatonit's
children, the host's clock; Debian's podman 4.3.1 with runc): the same template and parser as Docker's, each
state turning into the finding a person expects. Podman 4.3's crash loop reads ``stopped, Pid 0`` between runs
(no backoff, no ``Restarting``): named as a crash loop, never a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands.checks.check import HttpRequest, Read
from commands.checks.docker import DockerHealthCheck, DockerStaleCheck, PodmanMainPid
from commands.checks.docker_state import inspect_argv, parse_docker_state
from commands.checks.file_times import FILE_TIMES
from commands.checks.managers import checks_for
from commands.checks.pid_read import MAIN_PID_READ
from commands.command_result import CommandResult
from commands.inventory import Service, parse_inventory
from commands.restart.plan import restart_argv
from commands.verify.next_steps import next_step
from commands.verify.plan import VerifyPlan
from commands.vocabulary import CheckStatus, Operation

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str, exit_status: int = 0) -> CommandResult:
    return CommandResult("podman inspect …", exit_status, (RECORDED / name).read_bytes(), 0.01)


def podman_service(**extra: object) -> Service:
    return Service.model_validate({"manager": "podman", "container": "sglang",
                                   "health_url": "http://127.0.0.1:30000/health", **extra})


def main_pid(result: CommandResult, **extra: object) -> tuple[CheckStatus, str, dict[str, object]]:
    finding = PodmanMainPid(podman_service(**extra)).parse(Read((result,)))
    return finding.status, finding.summary, finding.details


def test_podman_is_registered_with_the_engine_neutral_classes() -> None:
    manager = checks_for(podman_service())
    assert (manager.main_pid, manager.stale, manager.health) == (PodmanMainPid, DockerStaleCheck,
                                                                  DockerHealthCheck)


@pytest.mark.parametrize(("engine", "argv"), [
    (None, ["podman"]),
    ("/usr/local/bin/podman", ["/usr/local/bin/podman"]),
    ("unix:///run/podman/podman.sock", ["podman", "-H", "unix:///run/podman/podman.sock"]),
    ({"cli": "/opt/podman", "host": "unix:///run/p.sock"}, ["/opt/podman", "-H", "unix:///run/p.sock"]),
])
def test_the_cli_is_podman_unless_engine_names_another(engine: object, argv: list[str]) -> None:
    service = podman_service(**({"engine": engine} if engine is not None else {}))
    assert inspect_argv(service)[:len(argv) + 3] == [*argv, "inspect", "--type", "container"]
    assert inspect_argv(service)[-1] == "sglang"


def test_catatonit_is_reported_and_its_one_child_is_the_main_pid() -> None:
    status, summary, details = main_pid(recorded("podman_state_init.txt"), min_uptime_s=0)
    assert status is CheckStatus.PASS, summary
    assert "sglang running, main PID 19916 (child of podman-init, PID 19896: the container's PID 1)" in summary
    assert details["main_pid"] == 19916 and details["container_pid"] == 19896
    assert details["started_at"] == "2026-12-01T22:09:27.852Z"


def test_stopped_between_runs_of_a_restart_policy_is_a_crash_loop_with_its_exit_code() -> None:
    status, summary, details = main_pid(recorded("podman_state_crash_loop.txt"))
    assert status is CheckStatus.FAIL
    assert summary == ("sglang is in a crash loop: stopped between runs (Pid: 0), last exit code 1 at "
                       "2026-12-01T22:09:28.773068213Z; its restart policy (always) has restarted it 1 time")
    assert details["main_pid"] is None


def test_a_young_run_of_a_restarting_container_warns_and_says_a_crash_loop_looks_like_this() -> None:
    """The same loop caught in its 0.2 s of life: Running, a real PID, never a pass."""
    status, summary, details = main_pid(recorded("podman_state_crash_loop_young.txt"))
    assert status is CheckStatus.WARN
    assert "main PID 20104 (child of podman-init, PID 20093" in summary
    assert "up only 0.2 s (min_uptime_s 10): not yet proven stable; its restart policy (always) has " \
        "restarted it 2 times: a crash loop looks like this; verify again" in summary
    assert details["main_pid"] == 20104


def test_restart_count_is_never_evidence_for_a_pass() -> None:
    """A run up past min_uptime_s passes on StartedAt and the host's clock, whatever the engine counted."""
    status, summary, _ = main_pid(recorded("podman_state_crash_loop_young.txt"), min_uptime_s=0)
    assert status is CheckStatus.PASS and "restart" not in summary


def test_a_stopped_container_without_a_restart_policy_is_stopped_not_a_crash_loop() -> None:
    text = (RECORDED / "podman_state_crash_loop.txt").read_text().replace('"always"', '""')
    status, summary, _ = main_pid(CommandResult("podman inspect", 0, text.encode(), 0.01))
    assert status is CheckStatus.FAIL and "crash loop" not in summary
    assert summary.startswith("sglang is stopped, exit code 1 at 2026-12-01T22:09:28.773068213Z: no running")


def test_a_container_that_does_not_exist_fails_in_podmans_words() -> None:
    status, summary, _ = main_pid(recorded("podman_state_no_such.txt", exit_status=125))
    assert status is CheckStatus.FAIL
    assert summary == ("no container sglang on this host (the engine says: Error: inspecting object: "
                       "no such container ghost)")


def test_podmans_state_parses_the_same_fields_as_dockers() -> None:
    state = parse_docker_state(recorded("podman_state_init.txt"))
    assert state is not None
    assert (state.status, state.pid, state.network_mode, state.addresses, state.published) == (
        "running", 19896, "host", {}, frozenset())
    assert (state.init_flag, state.init_comm, state.children, state.restart_policy) == (
        True, "podman-init", (19916,), "")


def test_stale_process_is_judged_against_podmans_started_at() -> None:
    """StartedAt 22:09:27.85Z: a watched file written after it means the running process predates the code."""
    service = podman_service()
    listing = CommandResult("find", 0, b"1796162999.0\t/srv/app/model.py\0", 0.01)
    needed = {"main-pid": (recorded("podman_state_init.txt"),),
              MAIN_PID_READ: (CommandResult("echo main PID", 0, b"19916", 0.0),), FILE_TIMES: (listing,)}
    finding = DockerStaleCheck(service, ("/srv/app/model.py",)).parse(Read((), needed))
    assert finding.status is CheckStatus.WARN, finding.summary
    assert finding.summary.startswith("PID 19916 started 22:09:27 UTC")


def test_inventory_names_podmans_keys_and_next_steps_offer_proofbots_restart() -> None:
    host = parse_inventory("hosts:\n  ct129:\n    address: 10.0.0.1\n    service: {manager: podman, container: "
                           "sglang, health_url: 'http://127.0.0.1:30000/health'}\n", "i.yml").host("ct129")
    assert host.service is not None and host.service.engine is not None and host.service.engine.cli == "podman"
    from commands.findings import Finding

    step = next_step(Finding("health", CheckStatus.FAIL, "x"), VerifyPlan.for_host(host, None))
    assert step is not None and step.operation is Operation.RESTART and step.args == ("ct129",)
    assert restart_argv(host.service) == ["podman", "restart", "sglang"]
    with pytest.raises(ValueError, match="manager podman needs `container: NAME`"):
        podman_service(container=None, unit="sglang")


def test_bridge_health_goes_to_the_address_podman_inspect_gives_and_a_published_port_as_written() -> None:
    """Recorded in the lab: a CNI bridge, the container's port 30015 published on the host's 30015."""
    read = Read((), {"main-pid": (recorded("podman_state_bridge.txt"),)})
    state = parse_docker_state(recorded("podman_state_bridge.txt"))
    assert state is not None and state.network_mode == "bridge" and state.published == frozenset({30015})
    request = DockerHealthCheck("http://127.0.0.1:30014/health").request_from(read)
    assert isinstance(request, HttpRequest) and request.url == "http://10.231.140.194:30014/health"
    assert DockerHealthCheck("http://127.0.0.1:30015/health").request_from(read) is None
