"""Compose's ``main-pid`` (``manager: compose``): the container is found by compose's labels (project, service,
not a one-off) with ``docker ps`` and inspected in the same step, so a recreated container is followed; the
rest is docker's (``commands.checks.docker``) on the container found. Compose v1 (docker-compose 1.29) labels."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import ClassVar

from commands.checks.check import Read, Script, Step
from commands.checks.docker import DockerMainPid, docker_main_pid_finding
from commands.checks.docker_state import inspect_argv, state_step
from commands.checks.engine_guard import guarded
from commands.checks.service import ServiceState
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding, could_not_check
from commands.inventory import Service
from commands.inventory.containers import Engine
from commands.vocabulary import CheckStatus

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
ONE_OFF_LABEL = "com.docker.compose.oneoff"  # `docker-compose run` containers: never the service
_FOUND = re.compile(r"^compose ps exit (\d+), containers:((?: [0-9a-f]{64})*) ?$")
SHORT_ID = 12


def ps_argv(service: Service) -> list[str]:
    """The service's containers by compose's labels, stopped ones too (a crash-looping one is the service)."""
    engine = service.engine or Engine()
    return [*engine.argv(), "ps", "--all", "--no-trunc", "--filter", f"label={PROJECT_LABEL}={service.project}",
            "--filter", f"label={SERVICE_LABEL}={service.service}", "--filter", f"label={ONE_OFF_LABEL}=False",
            "--format", "{{.ID}}"]


def compose_state_step(service: Service) -> Script:
    """``docker ps`` by the labels; with exactly one container found, docker's state step on its id (the id is
    taken only as 64 hex digits); else the engine's words, the ids and the host's clock, exit 1."""
    inspect = inspect_argv(service)
    docker = state_step(service, shlex.join(guarded(inspect[:-1])) + ' "$pb_cid"')
    script = "\n".join([
        f"pb_out=$({shlex.join(guarded(ps_argv(service)))} </dev/null 2>&1); pb_found=$?",
        "pb_ids=$(printf '%s\\n' \"$pb_out\" | grep -E '^[0-9a-f]{64}$' | head -n 20 | tr '\\n' ' ')",
        "[ \"$pb_found\" -eq 0 ] || printf '%s\\n' \"$pb_out\" | head -c 1000",
        "printf 'compose ps exit %s, containers: %s\\n' \"$pb_found\" \"$pb_ids\"",
        "pb_cid=${pb_ids%% *}; pb_pid=",
        'if [ "$pb_found" -eq 0 ] && [ "$(printf \'%s\' "$pb_ids" | wc -w)" -eq 1 ]; then',
        docker.text,
        "else",
        "  printf 'now %s\\n' \"$(date +%s.%N)\"; (exit 1)",
        "fi",
    ])
    return Script(script, f"{shlex.join(ps_argv(service))} && {shlex.join(inspect[:-1])} ID")


@dataclass(frozen=True)
class Found:
    """What ``docker ps`` by the labels said: its exit status and the container ids it listed."""

    exit_status: int
    ids: tuple[str, ...]

    @property
    def one(self) -> str | None:
        return self.ids[0] if self.exit_status == 0 and len(self.ids) == 1 else None


def parse_found(result: CommandResult) -> Found | None:
    """The ``compose ps`` line of the step's output (pure); None when there is none."""
    for line in result.text.splitlines():
        if match := _FOUND.match(line):
            return Found(int(match.group(1)), tuple(match.group(2).split()))
    return None


@dataclass(frozen=True, init=False, repr=False, eq=False)  # adds no field: see commands.checks.check
class ComposeMainPid(DockerMainPid):
    manager: ClassVar[str] = "compose"

    def steps(self) -> list[Step]:
        return [compose_state_step(self.service)]

    def state(self, result: CommandResult) -> ServiceState | None:
        found = parse_found(result)
        if found is None or found.one is None:
            return None
        state = super().state(result)
        return None if state is None else state._replace(properties={**state.properties, "Id": found.one})

    def parse(self, read: Read) -> Finding:
        return compose_main_pid_finding(self.service, read.own[0])


def compose_main_pid_finding(service: Service, result: CommandResult) -> Finding:
    evidence = Evidence.of(result.command, result.exit_status, result.text, result.duration_s)
    name = f"compose service {service.unit}"
    found = parse_found(result)
    if found is None:
        return could_not_check("main-pid", f"could not list the containers of {name}: the step printed no "
                               "`compose ps` line", evidence)
    if found.exit_status != 0:
        words = " ".join(result.text.split("\ncompose ps exit")[0].split())[:200]
        return could_not_check("main-pid", f"could not list the containers of {name}: the engine says: "
                               f"{words or 'nothing'}", evidence)
    if not found.ids:
        return Finding("main-pid", CheckStatus.FAIL, f"no container of {name} on this host (none labelled "
                       f"{PROJECT_LABEL}={service.project}, {SERVICE_LABEL}={service.service})", evidence)
    if found.one is None:
        ids = ", ".join(container[:SHORT_ID] for container in found.ids[:10])
        return could_not_check("main-pid", f"{len(found.ids)} containers of {name} ({ids}): scaled or being "
                               "recreated; which one is the service cannot be told", evidence,
                               {"container_ids": list(found.ids)})
    finding = docker_main_pid_finding(service.unit, service.min_uptime_s, result)
    return replace(finding, summary=f"{finding.summary} (container {found.one[:SHORT_ID]})",
                   details={**finding.details, "container_id": found.one})

