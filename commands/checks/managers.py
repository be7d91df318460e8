"""The one map from a service manager to its check classes: adding a manager (containers are next) is adding
its classes here, no caller changes. Every caller asks ``checks_for(service)``."""

from __future__ import annotations

from dataclasses import dataclass

from commands.checks.cmdline import CmdlineCheck
from commands.checks.compose import ComposeMainPid
from commands.checks.docker import DockerHealthCheck, DockerMainPid, DockerStaleCheck, PodmanMainPid
from commands.checks.health import HealthCheck
from commands.checks.probe import ProbeCheck
from commands.checks.service import MainPid, SupervisordMainPid, SystemdMainPid
from commands.checks.stale import StaleCheck
from commands.errors import UsageError
from commands.inventory import Service


@dataclass(frozen=True)
class ManagerChecks:
    """The service checks of one manager, as classes: main-pid, cmdline, stale-process, health, probe."""

    main_pid: type[MainPid]
    cmdline: type[CmdlineCheck] = CmdlineCheck
    stale: type[StaleCheck] = StaleCheck
    health: type[HealthCheck] = HealthCheck
    probe: type[ProbeCheck] = ProbeCheck


MANAGERS: dict[str, ManagerChecks] = {
    SystemdMainPid.manager: ManagerChecks(SystemdMainPid),
    SupervisordMainPid.manager: ManagerChecks(SupervisordMainPid),
    DockerMainPid.manager: ManagerChecks(DockerMainPid, stale=DockerStaleCheck, health=DockerHealthCheck),
    PodmanMainPid.manager: ManagerChecks(PodmanMainPid, stale=DockerStaleCheck, health=DockerHealthCheck),
    ComposeMainPid.manager: ManagerChecks(ComposeMainPid, stale=DockerStaleCheck, health=DockerHealthCheck),
}


def checks_for(service: Service) -> ManagerChecks:
    try:
        return MANAGERS[service.manager]
    except KeyError:
        raise UsageError(f"no checks for service manager {service.manager!r}",
                         hint=f"proofbot knows: {', '.join(sorted(MANAGERS))}") from None
