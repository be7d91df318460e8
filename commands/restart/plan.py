"""Restart, step one: the plan, read from the host over one SSH connection, changing nothing.

It records what runs now: the main PID, when it started, its command line (redacted),
and on systemd the InvocationID, NRestarts and ExecMainStartTimestampMonotonic; plus what
the restart will run and what it must prove (flags, deadlines, probe). ``plan_hash`` is
the sha-256 of that content in canonical JSON, so an approval binds to the plan shown;
the restart re-reads the host and refuses if the process is no longer the planned one.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from commands.checks.cmdline import cmdline_argv, parse_cmdline
from commands.checks.service import (
    ServiceState,
    main_pid_check,
    parse_service_state,
    service_state_argv,
    supervisorctl,
)
from commands.checks.stale import parse_process_start, process_start_argvs
from commands.clock import utc_at, utc_now
from commands.command_result import CommandResult
from commands.errors import MissingOutput, PlanVoid, UsageError
from commands.findings import Evidence
from commands.inventory import Host, Service
from commands.operation import new_operation_id
from commands.plans import Plan, hash_of
from commands.redact import redact, redact_data
from commands.restart.container import ACTS, ContainerLook, is_container, look_of
from commands.ssh import HostConnection, connect
from commands.verify.runner import read_facts
from commands.vocabulary import Operation


@dataclass(frozen=True)
class ServiceSnapshot:
    """The service as the manager and /proc report it at one moment."""

    main_pid: int | None
    active: bool
    state: str
    invocation_id: str | None = None
    n_restarts: int | None = None
    exec_main_start_monotonic_us: int | None = None
    started_at: str | None = None  # the main process's start, UTC, from /proc/PID/stat
    started_epoch: float | None = None
    cmdline: str | None = None  # redacted, arguments joined by spaces
    # Containers (commands/restart/container.py): the run's State.StartedAt (epoch), the container's id
    # (compose: the one its labels found) and the host's clock when this was read (a restart sent after it
    # proves a run by a StartedAt later than it).
    container_started: float | None = None
    container_id: str | None = None
    host_clock: float | None = None

    @classmethod
    def of(cls, state: ServiceState, start_epoch: float | None = None, cmdline: str | None = None,
           look: ContainerLook | None = None) -> ServiceSnapshot:
        props = state.properties
        return cls(state.main_pid, state.active, state.state,
                   props.get("InvocationID") or None, _int(props.get("NRestarts")),
                   _int(props.get("ExecMainStartTimestampMonotonic")),
                   utc_at(start_epoch) if start_epoch is not None else None,
                   round(start_epoch, 2) if start_epoch is not None else None, cmdline,
                   look.started_at if look else None, look.container_id if look else None,
                   look.host_now if look else None)


CONTAINER_FIELDS = ("container_started", "container_id", "host_clock")


def restart_argv(service: Service) -> list[str]:
    """The one command the action step runs."""
    if service.manager == "systemd":
        return ["systemctl", "restart", service.unit]
    if service.manager in ACTS:
        return ACTS[service.manager](service)
    if service.manager != "supervisord":
        raise UsageError(f"restart of a {service.manager} service is not built yet: proofbot can verify "
                         f"{service.unit}, not restart it", hint="restart it by hand, then proofbot verify")
    return [*supervisorctl(service), "restart", service.unit]


@dataclass(frozen=True)
class RestartPlan(Plan):
    """What a restart of one host's service would do, and the state it was planned against."""

    operation: ClassVar[str] = Operation.RESTART
    operation_id: str
    host: Host
    before: ServiceSnapshot
    created_at: str = field(default_factory=utc_now)
    evidence: tuple[Evidence, ...] = ()

    @property
    def service(self) -> Service:
        assert self.host.service is not None  # plan_restart refuses hosts without one
        return self.host.service

    @property
    def restart_command(self) -> str:
        return shlex.join(restart_argv(self.service))

    def content(self) -> dict[str, Any]:
        """Everything approval binds to: the target, the action, the proof demanded, the state seen."""
        service = self.service
        probe = service.probe
        return {
            "host": self.host.name, "address": self.host.address, "port": self.host.port,
            "manager": service.manager, "unit": service.unit, "restart_command": self.restart_command,
            "health_url": service.health_url, "expect_flags": list(service.expect_flags),
            "forbid_flags": list(service.forbid_flags), "ready_timeout_s": service.ready_timeout_s,
            "min_startup_s": service.min_startup_s,
            "probe": None if probe is None else {
                "url": probe.url, "json": probe.json_body, "timeout_s": probe.timeout_s, "expect": probe.expect,
                "header_names": sorted(probe.headers)},
            # a container's fields only when read: a systemd or supervisord plan hashes as it did before them
            "before": {key: value for key, value in asdict(self.before).items()
                       if value is not None or key not in CONTAINER_FIELDS},
        }

    @property
    def plan_hash(self) -> str:
        return hash_of(self.content())

    def to_json(self) -> dict[str, Any]:
        """As shown and stored (``plan-shown``, the plans table): URLs, probe body and evidence masked.
        ``plan_hash`` stays the hash of the raw content, so approval still binds to the real values."""
        return redact_data({"operation_id": self.operation_id, "operation": self.operation,
                            "created_at": self.created_at, "plan_hash": self.plan_hash, **self.content(),
                            "evidence": [asdict(evidence) for evidence in self.evidence]})

    @classmethod
    def rebuild(cls, data: dict[str, Any], host: Host) -> RestartPlan:
        if host.service is None or data.get("host") != host.name:
            raise PlanVoid(f"plan {data.get('operation_id')} is not a restart plan for {host.name}")
        return cls(str(data["operation_id"]), host, ServiceSnapshot(**data["before"]), str(data["created_at"]),
                   tuple(Evidence(**evidence) for evidence in data.get("evidence", [])))


async def plan_restart(host: Host, *, operation_id: str | None = None) -> RestartPlan:
    """Read the service's current state over one SSH connection; nothing on the host changes."""
    if host.service is None:
        raise UsageError(f"{host.name} has no service in the inventory", hint="add hosts.<name>.service")
    restart_argv(host.service)  # a manager proofbot cannot restart is refused before anything is read
    async with connect(host) as conn:
        snapshot, results = await read_snapshot(conn, host.service)
    evidence = tuple(Evidence.of(r.command, r.exit_status, _shown(r), r.duration_s) for r in results)
    return RestartPlan(operation_id or new_operation_id(), host, snapshot, evidence=evidence)


async def read_snapshot(conn: HostConnection, service: Service) -> tuple[ServiceSnapshot, list[CommandResult]]:
    """The manager's state, then (one more round trip) the main process's start time and cmdline."""
    if is_container(service):  # the check's own step: the init's child, the host's clock, compose's labels
        first = list((await read_facts(conn, [main_pid_check(service)]))["main-pid"])
    else:
        first = await conn.run_batch([service_state_argv(service)])
    state = parse_service_state(service, first[0])
    if state is None:
        raise MissingOutput(f"{conn.host.name}: could not read the state of {service.unit}: "
                            f"{redact(first[0].text.strip())[:300] or 'no output'}",
                            hint=f"check that {service.manager} knows {service.unit}")
    look = look_of(service, first[0])
    if state.main_pid is None:
        return ServiceSnapshot.of(state, look=look), first
    pid = state.main_pid
    second = await conn.run_batch([cmdline_argv(pid), *process_start_argvs(pid)])
    start = parse_process_start(pid, *second[1:4])
    args = parse_cmdline(second[0])
    cmdline = redact(" ".join(args)) if second[0].exit_status == 0 and args else None
    return ServiceSnapshot.of(state, start.started_at if start else None, cmdline, look), first + second


def _shown(result: CommandResult) -> str:
    return result.text.replace("\x00", " ")


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None

