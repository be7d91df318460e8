"""``main-pid``: the service manager reports the unit running with a main PID."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.inventory import Service

SYSTEMD_PROPERTIES = (
    "MainPID", "ActiveState", "SubState", "InvocationID", "NRestarts", "ExecMainStartTimestampMonotonic",
)
_SUPERVISOR_LINE = re.compile(r"^(\S+)\s+([A-Z]+)\s*(.*)$")
_SUPERVISOR_PID = re.compile(r"\bpid (\d+)")


@dataclass(frozen=True)
class ServiceState:
    main_pid: int | None
    active: bool
    state: str
    properties: dict[str, str] = field(default_factory=dict)


def service_state_argv(service: Service) -> list[str]:
    if service.manager == "systemd":
        return ["systemctl", "show", service.unit, "--property=" + ",".join(SYSTEMD_PROPERTIES)]
    return [*supervisorctl(service), "status", service.unit]


def supervisorctl(service: Service) -> list[str]:
    config = ["-c", service.supervisor_config] if service.supervisor_config else []
    return ["supervisorctl", *config]


def parse_service_state(service: Service, result: CommandResult) -> ServiceState | None:
    """The state the manager reported, or None when its output says nothing usable."""
    if service.manager == "systemd":
        props = dict(line.split("=", 1) for line in result.text.splitlines() if "=" in line)
        if "MainPID" not in props or "ActiveState" not in props:
            return None
        pid = int(props["MainPID"]) if props["MainPID"].isdigit() else 0
        state = f"{props['ActiveState']}/{props.get('SubState', '?')}"
        return ServiceState(pid or None, props["ActiveState"] == "active", state, props)
    for line in result.text.splitlines():
        match = _SUPERVISOR_LINE.match(line.strip())
        if match and match.group(1).split(":")[-1] == service.unit:
            pid_match = _SUPERVISOR_PID.search(match.group(3))
            supervised_pid = int(pid_match.group(1)) if pid_match else 0
            running = match.group(2) == "RUNNING"
            return ServiceState(supervised_pid or None, running, match.group(2), {"detail": match.group(3)})
    return None


def main_pid_finding(service: Service, result: CommandResult) -> tuple[Finding, ServiceState | None]:
    evidence = Evidence.of(result.command, result.exit_status, result.text, result.duration_s)
    state = parse_service_state(service, result)
    if state is None:
        if not result.text.strip():
            return Finding("main-pid", "error", f"{service.manager} printed nothing for {service.unit}",
                           evidence), None
        return Finding("main-pid", "error", f"could not read the state of {service.unit}", evidence), None
    if state.main_pid and state.active:
        return Finding("main-pid", "pass", f"{service.unit} {state.state}, main PID {state.main_pid}",
                       evidence, {"main_pid": state.main_pid}), state
    return Finding("main-pid", "fail", f"{service.unit} is {state.state}, no running main PID",
                   evidence, {"main_pid": state.main_pid}), state
