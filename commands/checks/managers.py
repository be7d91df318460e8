"""The one map from a service manager to its check classes: adding a manager (containers are next) is adding
its classes here, no caller changes. Every caller asks ``checks_for(service)``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from commands.checks.cmdline import CmdlineCheck
from commands.checks.health import HealthCheck
from commands.checks.probe import ProbeCheck
from commands.checks.service import MainPid, SupervisordMainPid, SystemdMainPid
from commands.checks.stale import StaleCheck
from commands.errors import UsageError
from commands.inventory import Service
from commands.inventory.containers import CONTAINER_MANAGERS


class ManagerChecks(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    """The service checks of one manager, as classes: main-pid, cmdline, stale-process, health, probe."""

    main_pid: type[MainPid]
    cmdline: type[CmdlineCheck] = CmdlineCheck
    stale: type[StaleCheck] = StaleCheck
    health: type[HealthCheck] = HealthCheck
    probe: type[ProbeCheck] = ProbeCheck


def _container(manager: str) -> ManagerChecks:
    """A container manager's checks, loaded for a container service only (a dozen modules most verifies never
    run: docker, compose, their guards and state parsers)."""
    from commands.checks.compose import ComposeMainPid
    from commands.checks.docker import DockerHealthCheck, DockerMainPid, DockerStaleCheck, PodmanMainPid

    [main_pid] = [each for each in (DockerMainPid, PodmanMainPid, ComposeMainPid) if each.manager == manager]
    return ManagerChecks(main_pid, stale=DockerStaleCheck, health=DockerHealthCheck)


MANAGERS: dict[str, Callable[[], ManagerChecks]] = {
    SystemdMainPid.manager: lambda: ManagerChecks(SystemdMainPid),
    SupervisordMainPid.manager: lambda: ManagerChecks(SupervisordMainPid),
    **{manager: partial(_container, manager) for manager in CONTAINER_MANAGERS},
}


def checks_for(service: Service) -> ManagerChecks:
    try:
        return MANAGERS[service.manager]()
    except KeyError:
        raise UsageError(f"no checks for service manager {service.manager!r}",
                         hint=f"proofbot knows: {', '.join(sorted(MANAGERS))}") from None
