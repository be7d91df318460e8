"""``main-pid``: the service manager reports the unit running with a main PID; one check class per manager.

A class knows its manager's state command, how the host-side script takes the main PID from its answer
(``commands.checks.pid_read``) and how the pure parser reads the answer. ``commands.checks.managers`` maps
each manager to its classes."""

from __future__ import annotations

import re
import shlex
from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from commands.checks.check import Check, Read, Step
from commands.checks.pid_read import MAIN_PID_READ, shell_pid, state_script
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.frozen import Frozen
from commands.inventory import Service
from commands.vocabulary import CheckStatus

SYSTEMD_PROPERTIES = (
    "MainPID", "ActiveState", "SubState", "InvocationID", "NRestarts", "ExecMainStartTimestampMonotonic",
)
_SUPERVISOR_LINE = re.compile(r"^(\S+)\s+([A-Z]+)\s*(.*)$")
_SUPERVISOR_PID = re.compile(r"\bpid (\d+)")


class ServiceState(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    main_pid: int | None
    active: bool
    state: str
    properties: dict[str, str]


def service_state_argv(service: Service) -> list[str]:
    """The manager's state command for ``service`` (its main-pid check class's)."""
    return main_pid_check(service).argv()


def parse_service_state(service: Service, result: CommandResult) -> ServiceState | None:
    """The state the manager reported, or None when its output says nothing usable."""
    return main_pid_check(service).state(result)


def main_pid_check(service: Service) -> MainPid:
    from commands.checks.managers import checks_for  # the one map of manager -> check classes

    return checks_for(service).main_pid(service)


@dataclass(frozen=True, eq=False, repr=False)
class MainPid(Check, Frozen):
    """``main-pid`` for one manager; its one step also keeps the PID in the batch's shell for the reads after it."""

    service: Service
    manager: ClassVar[str]

    @property
    def name(self) -> str:
        return "main-pid"

    @abstractmethod
    def argv(self) -> list[str]:
        """The manager's state command."""

    @abstractmethod
    def pid_filter(self) -> str:
        """Shell text that prints the main PID from the manager's answer on its stdin (checked after it)."""

    @abstractmethod
    def state(self, result: CommandResult) -> ServiceState | None:
        """The state the manager reported, or None when its output says nothing usable (pure)."""

    def steps(self) -> list[Step]:
        return [state_script(self.argv(), self.pid_filter())]

    def invocation(self, state: ServiceState) -> str | None:
        """What tells one run of the unit from the next where a PID may be reused (None: the manager has none)."""
        return None

    def restart_count(self, state: ServiceState) -> str | None:
        """How many times the manager restarted the unit by itself, as it said it (None: it does not say)."""
        return None

    def is_new(self, state: ServiceState, before_pid: int | None, before_invocation: str | None) -> bool:
        """A new process since ``before``: a new main PID."""
        return state.main_pid is not None and state.main_pid != before_pid

    def parse(self, read: Read) -> Finding:
        return main_pid_finding(self.service, read.own[0])[0]


@dataclass(frozen=True, init=False, repr=False, eq=False)  # adds no field: see commands.checks.check
class SystemdMainPid(MainPid):
    manager: ClassVar[str] = "systemd"

    def argv(self) -> list[str]:
        return ["systemctl", "show", self.service.unit, "--property=" + ",".join(SYSTEMD_PROPERTIES)]

    def pid_filter(self) -> str:
        return "sed -n 's/^MainPID=\\([0-9]*\\)$/\\1/p' | head -n 1"  # the one `MainPID=` line

    def invocation(self, state: ServiceState) -> str | None:
        return state.properties.get("InvocationID") or None

    def restart_count(self, state: ServiceState) -> str | None:
        return state.properties.get("NRestarts", "?")

    def is_new(self, state: ServiceState, before_pid: int | None, before_invocation: str | None) -> bool:
        """A new InvocationID with a main PID: PIDs get reused, an invocation never is."""
        invocation = self.invocation(state)
        return state.main_pid is not None and invocation is not None and invocation != before_invocation

    def state(self, result: CommandResult) -> ServiceState | None:
        props = dict(line.split("=", 1) for line in result.text.splitlines() if "=" in line)
        if "MainPID" not in props or "ActiveState" not in props:
            return None
        pid = int(props["MainPID"]) if props["MainPID"].isdigit() else 0
        state = f"{props['ActiveState']}/{props.get('SubState', '?')}"
        return ServiceState(pid or None, props["ActiveState"] == "active", state, props)


@dataclass(frozen=True, init=False, repr=False, eq=False)  # adds no field: see commands.checks.check
class SupervisordMainPid(MainPid):
    manager: ClassVar[str] = "supervisord"

    def argv(self) -> list[str]:
        return [*supervisorctl(self.service), "status", self.service.unit]

    def pid_filter(self) -> str:
        # the line whose program name (after any `group:`) is the unit and whose state is a word in
        # capitals, its `pid N,` field
        return (f"PB_UNIT={shlex.quote(self.service.unit)} awk '{{ name = $1; sub(/.*:/, \"\", name) }} "
                "name == ENVIRON[\"PB_UNIT\"] && $2 ~ /^[A-Z]+$/ "
                "{ if ($3 == \"pid\") { pid = $4; sub(/,$/, \"\", pid); print pid }; exit }'")

    def state(self, result: CommandResult) -> ServiceState | None:
        for line in result.text.splitlines():
            match = _SUPERVISOR_LINE.match(line.strip())
            if match and match.group(1).split(":")[-1] == self.service.unit:
                pid_match = _SUPERVISOR_PID.search(match.group(3))
                supervised_pid = int(pid_match.group(1)) if pid_match else 0
                running = match.group(2) == "RUNNING"
                return ServiceState(supervised_pid or None, running, match.group(2), {"detail": match.group(3)})
        return None


def supervisorctl(service: Service) -> list[str]:
    config = ["-c", service.supervisor_config] if service.supervisor_config else []
    return ["supervisorctl", *config]


def main_pid_finding(service: Service, result: CommandResult) -> tuple[Finding, ServiceState | None]:
    evidence = Evidence.of(result.command, result.exit_status, result.text, result.duration_s)
    state = parse_service_state(service, result)
    if state is None:
        if not result.text.strip():
            return Finding("main-pid", CheckStatus.ERROR, f"{service.manager} printed nothing for {service.unit}",
                           evidence), None
        return Finding("main-pid", CheckStatus.ERROR, f"could not read the state of {service.unit}", evidence), None
    if state.main_pid and state.active:
        return Finding("main-pid", CheckStatus.PASS, f"{service.unit} {state.state}, main PID {state.main_pid}",
                       evidence, {"main_pid": state.main_pid}), state
    return Finding("main-pid", CheckStatus.FAIL, f"{service.unit} is {state.state}, no running main PID",
                   evidence, {"main_pid": state.main_pid}), state


def agreed_pid(service: Service, read: Read) -> tuple[int | None, str]:
    """The main PID both the parser (from ``main-pid``'s output) and the host-side script read, or None and,
    when they disagree, why nothing read for it is judged."""
    state = main_pid_check(service).state(read.of("main-pid")[0])
    pid = state.main_pid if state else None
    if pid is None:
        return None, ""
    read_pid = shell_pid(read.of(MAIN_PID_READ)[0])
    if read_pid != pid:
        return None, (f"the host's script took main PID {read_pid or 'none'} from the manager's answer, "
                      f"the parser PID {pid}: nothing read for it is judged")
    return pid, ""
