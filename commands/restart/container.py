"""Restart of a container service, the engine-neutral part: the act (an engine's argv prefix and its restart
subcommand, or compose's) and each engine's inspect parser to one ``ContainerLook``, in one map per manager.

An engine plugs in by adding its manager to ``ACTS`` and ``LOOKS`` (Podman: ``podman restart NAME`` and its
inspect parser); the proof (``commands.restart.runs``) sees only looks. ``RestartCount`` is never read: it does
not count ``docker restart`` (moby#37596).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commands.checks.check import Reads
from commands.checks.compose import parse_found
from commands.checks.compose_guard import guard_argv, guarded_paths, optional_paths, refusal
from commands.checks.docker_state import DockerState, parse_docker_state
from commands.checks.engine_guard import refusal as engine_refusal
from commands.command_result import CommandResult
from commands.errors import Refused, UsageError
from commands.inventory import Service
from commands.inventory.containers import Engine


@dataclass(frozen=True)
class ContainerLook:
    """One inspect of the container, whatever the engine: what the restart's proof judges."""

    status: str  # the engine's word: running, restarting, exited, paused, created, dead
    running: bool
    restarting: bool
    container_pid: int  # State.Pid: the container's PID 1 on the host (0: none)
    pid: int | None  # the service's PID (the init's one child, or the container's PID 1); None: none
    exit_code: int  # State.ExitCode: the last run's
    started_at: float | None  # State.StartedAt, epoch seconds on the host's clock
    host_now: float | None  # the host's clock when it was read
    container_id: str | None = None  # compose: the container its labels found (a recreate is a new one)
    restart_policy: str = ""  # HostConfig.RestartPolicy.Name: whether the engine starts an ended run again

    @property
    def will_restart(self) -> bool:
        """An ended run the engine's policy starts again (Podman 4.3 does it at once, reading ``stopped`` until
        then, never ``Restarting``): not gone, whatever a poll caught between two runs."""
        return self.restart_policy in ("always", "unless-stopped") or (
            self.restart_policy == "on-failure" and self.exit_code != 0)

    @property
    def up(self) -> bool:
        return self.running and not self.restarting and self.status == "running" and self.pid is not None

    @property
    def uptime_s(self) -> float | None:
        if self.started_at is None or self.host_now is None:
            return None
        return self.host_now - self.started_at

    @classmethod
    def of_docker(cls, state: DockerState, container_id: str | None = None) -> ContainerLook:
        return cls(state.status, state.running, state.restarting, state.pid, state.service_pid, state.exit_code,
                   state.started_at, state.host_now, container_id, state.restart_policy)


def docker_restart_argv(service: Service) -> list[str]:
    return [*(service.engine or Engine()).argv(), "restart", service.unit]


def compose_restart_argv(service: Service) -> list[str]:
    """``docker-compose -f FILE -p PROJECT restart SERVICE``: 1.29 loads the project's file to know its services
    (``project.restart`` validates the name against it), so without ``compose_file`` it is refused here."""
    if service.compose_file is None:
        raise UsageError(f"cannot restart compose service {service.unit}: docker-compose 1.29's restart reads the "
                         "project's compose file, and the inventory names none (verify does not need it)",
                         hint="add compose_file: /path/to/docker-compose.yml to the service")
    engine = service.engine or Engine()
    daemon = ["-H", engine.host] if engine.host else []
    return [engine.compose, *daemon, "-f", service.compose_file, "-p", str(service.project), "restart",
            str(service.service)]


def docker_look(result: CommandResult) -> ContainerLook | None:
    state = parse_docker_state(result)
    return None if state is None else ContainerLook.of_docker(state)


def compose_look(result: CommandResult) -> ContainerLook | None:
    found = parse_found(result)
    state = parse_docker_state(result) if found is not None and found.one is not None else None
    return None if state is None or found is None else ContainerLook.of_docker(state, found.one)


# Podman: `podman restart NAME` (its CLI is the engine: run over SSH in the host, a `--network host` container
# stays in the host's network namespace) and the same inspect parser.
ACTS: dict[str, Callable[[Service], list[str]]] = {"docker": docker_restart_argv, "podman": docker_restart_argv,
                                                   "compose": compose_restart_argv}
LOOKS: dict[str, Callable[[CommandResult], ContainerLook | None]] = {"docker": docker_look, "podman": docker_look,
                                                                     "compose": compose_look}


def is_container(service: Service) -> bool:
    return service.manager in LOOKS


def look_of(service: Service, result: CommandResult) -> ContainerLook | None:
    """The container as its main-pid step's output shows it (pure); None: not a container or unreadable."""
    parse = LOOKS.get(service.manager)
    return parse(result) if parse else None


ACT_GUARD = "act-guard"


def act_guard(service: Service) -> list[Reads]:
    """A compose restart's ``docker-compose``, compose file and ``.env``, guarded in the same batch as the state read
    that plans and re-checks it (the engine's CLI has its own guard at every run); none for another manager."""
    if service.manager != "compose":
        return []
    return [Reads(ACT_GUARD, (guard_argv(guarded_paths(service), optional_paths(service)),))]


def refuse_unguarded(host: str, service: Service, results: list[CommandResult]) -> None:
    """Raise ``Refused`` when a guard in these results refused (compose's, or the engine's at the state read: its CLI
    or its socket): nothing is restarted (nothing was run)."""
    for result in results:
        if why := refusal(result) or engine_refusal(result):
            raise Refused(f"{host}: not restarting {service.unit}: {why}",
                          hint="make it owned by root (or the SSH user) and writable by no other user (chown root, "
                          "chmod go-w; a daemon's socket may stay writable by its group docker)")
