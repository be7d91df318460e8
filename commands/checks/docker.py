"""The container engines' check classes (``manager: docker`` and ``podman``, one set for both): ``main-pid``
from ``inspect`` on the host (a crash loop is named, Docker's ``Restarting`` and Podman's ``stopped, Pid 0``
between runs; with ``--init`` the service is the init's one child), ``stale-process`` against
``State.StartedAt``, ``health`` at the container's address on a bridge network.
``cmdline`` is the generic one: it reads /proc/<the service's PID>/cmdline on the host. ``RestartCount`` is
never read: it does not count ``docker restart`` (moby#37596)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import ClassVar
from urllib.parse import urlsplit, urlunsplit

from commands.checks.check import HttpRequest, Read, Step
from commands.checks.docker_state import (
    DockerState,
    engine_words,
    inspect_argv,
    no_such_container,
    parse_docker_state,
    pid_filter,
    state_step,
)
from commands.checks.file_times import FILE_TIMES, parse_listing
from commands.checks.health import HealthCheck, HttpOutcome, health_finding
from commands.checks.service import MainPid, ServiceState, agreed_pid
from commands.checks.stale import ProcessStart, StaleCheck, stale_finding
from commands.clock import utc_at
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding, could_not_check
from commands.vocabulary import CheckStatus
from commands.wording import age_words


@dataclass(frozen=True, init=False, repr=False, eq=False)  # adds no field: see commands.checks.check
class DockerMainPid(MainPid):
    manager: ClassVar[str] = "docker"

    def argv(self) -> list[str]:
        return inspect_argv(self.service)

    def pid_filter(self) -> str:
        return pid_filter()

    def steps(self) -> list[Step]:
        return [state_step(self.service)]

    def state(self, result: CommandResult) -> ServiceState | None:
        docker = parse_docker_state(result)
        if docker is None:
            return None
        props = {"StartedAt": str(docker.started_at), "Pid": str(docker.pid), "Status": docker.status}
        return ServiceState(docker.service_pid, docker.up, docker.status, props)

    def invocation(self, state: ServiceState) -> str | None:
        """One run of the container from the next: its StartedAt (a PID may be reused, a start time is not)."""
        return state.properties.get("StartedAt") or None

    def parse(self, read: Read) -> Finding:
        return docker_main_pid_finding(self.service.unit, self.service.min_uptime_s, read.own[0])


@dataclass(frozen=True, init=False, repr=False, eq=False)  # adds no field: see commands.checks.check
class PodmanMainPid(DockerMainPid):
    """Podman's: the same inspect template and parser (the CLI is the engine; no daemon)."""

    manager: ClassVar[str] = "podman"


def docker_main_pid_finding(name: str, min_uptime_s: float, result: CommandResult) -> Finding:
    evidence = Evidence.of(result.command, result.exit_status, result.text, result.duration_s)
    docker = parse_docker_state(result)
    if docker is None:
        if no_such_container(result):
            return Finding("main-pid", CheckStatus.FAIL, f"no container {name} on this host (the engine says: "
                           f"{engine_words(result)})", evidence)
        return could_not_check("main-pid", f"could not read the state of container {name}: "
                               f"{engine_words(result) or 'the engine printed nothing'}", evidence)
    details: dict[str, object] = {"main_pid": docker.service_pid, "container_pid": docker.pid or None,
                                  "started_at": utc_at(docker.started_at) if docker.started_at else None}
    if looping := _crash_loop(name, docker):
        return Finding("main-pid", CheckStatus.FAIL, looping, evidence, details)
    if not docker.running or docker.paused or not docker.pid:
        ended = f", exit code {docker.exit_code} at {docker.finished_at}" \
            if docker.status in ("exited", "stopped") else ""
        return Finding("main-pid", CheckStatus.FAIL, f"{name} is {docker.status}{ended}: no running main PID",
                       evidence, details)
    init = f" (child of {docker.init_comm or 'init'}, PID {docker.init_pid}: the container's PID 1)" \
        if docker.init_pid is not None else ""
    if docker.init_pid is not None and len(docker.children) != 1:
        if not docker.children:
            comm = f" {docker.init_comm}" if docker.init_comm else ""
            return Finding("main-pid", CheckStatus.FAIL, f"{name}: its init{comm} (PID {docker.init_pid}) runs with "
                           f"no child: the service is not running{_policy_words(docker)}", evidence, details)
        kids = ", ".join(map(str, docker.children[:10]))
        return could_not_check("main-pid", f"{name}: its init (PID {docker.init_pid}) has {len(docker.children)} "
                               f"children ({kids}): which one is the service cannot be told", evidence, details)
    return _running(name, min_uptime_s, docker, init, evidence, details)


def _crash_loop(name: str, docker: DockerState) -> str | None:
    """The words naming a crash loop, with the exit code seen, or None when the state shows none."""
    if docker.restarting:
        return (f"{name} is in a crash loop: Restarting: true, Running: {str(docker.running).lower()}, "
                f"Pid: {docker.pid}, last exit code {docker.exit_code}")
    if docker.between_runs:
        return (f"{name} is in a crash loop: {docker.status} between runs (Pid: 0), last exit code "
                f"{docker.exit_code} at {docker.finished_at}; its restart policy ({docker.restart_policy}) "
                f"has restarted it {_times(docker.restart_count)}")
    return None


def _running(name: str, min_uptime_s: float, docker: DockerState, init: str, evidence: Evidence,
             details: dict[str, object]) -> Finding:
    pid = docker.service_pid
    uptime = docker.uptime_s
    if uptime is None:
        return Finding("main-pid", CheckStatus.WARN, f"{name} running, main PID {pid}{init}, but how long it has "
                       "been up could not be read: not proven stable", evidence, details)
    if uptime < min_uptime_s:
        return Finding("main-pid", CheckStatus.WARN,
                       f"{name} running, main PID {pid}{init}, up only {uptime:.1f} s (min_uptime_s "
                       f"{min_uptime_s:g}): not yet proven stable{_policy_words(docker)}; verify again", evidence,
                       details)
    return Finding("main-pid", CheckStatus.PASS, f"{name} running, main PID {pid}{init}, up {age_words(uptime)}",
                   evidence, details)


def _policy_words(docker: DockerState) -> str:
    """A run caught starting or ending, when the engine's policy has been restarting it: say what it looks like."""
    if not docker.restart_count:
        return ""
    return (f"; its restart policy ({docker.restart_policy}) has restarted it {_times(docker.restart_count)}: a "
            "crash loop looks like this")


def _times(count: int) -> str:
    return f"{count} time{'' if count == 1 else 's'}"


@dataclass(frozen=True, init=False, repr=False, eq=False)  # adds no field: see commands.checks.check
class DockerStaleCheck(StaleCheck):
    """``stale-process`` against the container's ``State.StartedAt`` (the engine's, on the host's clock)."""

    def steps(self) -> list[Step]:
        return []  # main-pid's step already read StartedAt and the host's clock

    def parse(self, read: Read) -> Finding:
        pid, why = agreed_pid(self.service, read)
        if pid is None:
            return could_not_check("stale-process", why or "no running main PID to compare file times with")
        state_read = read.of("main-pid")[0]
        docker = parse_docker_state(state_read)
        start = ProcessStart(pid, docker.started_at, docker.host_now) if docker and docker.started_at else None
        listing = parse_listing(read.of(FILE_TIMES)[0])
        files = [path for path in listing.mtimes if path in self.files or os.path.dirname(path) in self.dirs]
        return stale_finding(start, files, listing, [state_read])


LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True, init=False, repr=False, eq=False)  # adds no field: see commands.checks.check
class DockerHealthCheck(HealthCheck):
    """``health`` from the host's side: with ``--network host`` (or a published port, or an address that is not
    the host's loopback) ``health_url`` as written; on a bridge network, the same URL at the container's
    address from the inspect that main-pid ran, over the same SSH connection."""

    needs: ClassVar[tuple[str, ...]] = ("main-pid",)

    def request_from(self, read: Read) -> HttpRequest | Finding | None:
        docker = parse_docker_state(read.of("main-pid")[0])
        url = urlsplit(self.url)
        if (docker is None or docker.network_mode == "host" or url.hostname not in LOOPBACK
                or (url.port or _DEFAULT_PORTS[url.scheme]) in docker.published):
            return None  # as written, already sent
        if not docker.addresses:
            return Finding("health", CheckStatus.FAIL, f"the container has no address on its network "
                           f"({docker.network_mode or 'none'}): {self.url} cannot reach it",
                           details={"network_mode": docker.network_mode})
        address = docker.addresses[sorted(docker.addresses)[0]]  # several networks: the first by name
        netloc = address + (f":{url.port}" if url.port else "")
        return HttpRequest(urlunsplit(url._replace(netloc=netloc)), self.request().timeout_s)

    def parse(self, outcome: HttpOutcome) -> Finding:
        finding = health_finding(outcome)
        if self.url in outcome.request:
            return finding
        return replace(finding, summary=f"{finding.summary} (at the container's address: {outcome.request})")


_DEFAULT_PORTS = {"http": 80, "https": 443}
