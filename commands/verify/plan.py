"""Verify, the plan: which checks a host gets, from its inventory entry and the backup chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from commands.errors import UnknownBackup, UsageError
from commands.inventory import Backup, Host
from commands.inventory.check import NOTHING_TO_CHECK, nothing_configured

if TYPE_CHECKING:
    from commands.checks.check import AnyCheck, Fact


class VerifyPlan(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    host: Host
    backup_name: str | None
    backup: Backup | None
    send_probe: bool = True  # False: the probe is reported ``skipped``, never sent

    @classmethod
    def for_host(cls, host: Host, backup_name: str | None, *, send_probe: bool = True,
                 alone: bool = False) -> VerifyPlan:
        """The host's plan; ``alone`` (a one-host verify): a host with nothing to check is refused, saying
        what to add (in a fleet it is one host among others, and says so in its row)."""
        if alone and (why := nothing_configured(host)) is not None:
            raise UsageError(f"nothing to verify: {why}", hint=NOTHING_TO_CHECK)
        if backup_name is None and not host.backups:
            return cls(host, None, None, send_probe)
        name, backup = host.backup(backup_name)
        return cls(host, name, backup, send_probe)

    def checks(self) -> list[AnyCheck]:
        """Every check of this verify, in the order the findings come."""
        # The check modules load here, on first use (see commands.verify): a plan alone needs none of them, and
        # a container's or the packages' checks only a host that has them.
        from commands.checks.extra_files import ExtraFilesCheck
        from commands.checks.files import FileCheck
        from commands.checks.managers import checks_for
        from commands.inventory.containers import in_container

        host, backup, packages = self.host, self.backup, self.host.packages
        checks: list[AnyCheck] = []
        if backup and self.backup_name:
            if host.service is not None and in_container(host.service):  # live files read inside the container
                from commands.checks.container_files import ContainerFileCheck

                checks += [ContainerFileCheck(name, self.backup_name, backup.backup_path(name), live,
                                              host.service.unit) for name, live in backup.files.items()]
            else:
                checks += [FileCheck(name, self.backup_name, backup.backup_path(name), live)
                           for name, live in backup.files.items()]
            checks += [ExtraFilesCheck(self.backup_name, backup)] if backup.watch else []
        if packages:  # the inventory refuses dists without python
            from commands.checks.deb import DebCheck
            from commands.checks.package import PackageCheck

            if packages.python and host.service is not None and in_container(host.service):  # its image's env
                from commands.checks.container_files import ContainerPackageCheck

                checks += [ContainerPackageCheck(packages.python, dist, host.service.unit) for dist in packages.dists]
            elif packages.python:
                checks += [PackageCheck(packages.python, dist) for dist in packages.dists]
            checks += [DebCheck(name) for name in packages.deb]
        service = host.service
        if service:
            manager = checks_for(service)
            checks += [manager.main_pid(service), manager.health(service.health_url), manager.cmdline(service)]
            if backup:
                checks.append(manager.stale(service, tuple(backup.files.values()), tuple(backup.watch)))
            if service.probe:
                checks.append(manager.probe(service.probe, self.send_probe))
        return checks

    def facts(self) -> list[Fact]:
        """What the checks read besides their own steps: the file listing, the PID the script kept."""
        from commands.checks.file_times import FileTimes
        from commands.checks.pid_read import MainPidRead
        from commands.inventory.containers import in_container

        facts: list[Fact] = [FileTimes.of_backup(self.backup)] if self.backup else []
        if self.backup and in_container(self.host.service):  # the live side inside the container, from the host
            from commands.checks.container_files import ContainerFiles, ContainerFileTimes

            facts = [ContainerFiles(tuple(self.backup.files.values())), ContainerFileTimes.of_backup(self.backup)]
        return facts + ([MainPidRead()] if self.host.service else [])

    def check_names(self) -> list[str]:
        return [check.name for check in self.checks()]


class FleetPlan(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    """Each host's plan, and why some hosts' files are not compared (host → the reason, in words)."""

    plans: list[VerifyPlan]
    without_backup: dict[str, str]


def plan_fleet(hosts: list[Host], backup_name: str | None, *, send_probe: bool = True) -> FleetPlan:
    """One plan per host. ``backup_name`` applies to the hosts that have it; a host without it, or
    with several backups and none named, is verified without files (its service and packages
    still are) and said plainly, rather than failing the whole fleet for one host's inventory.
    A backup that no host has is a typo: refused, nothing runs."""
    if backup_name is not None and not any(backup_name in host.backups for host in hosts):
        known = sorted({name for host in hosts for name in host.backups})
        raise UnknownBackup(f"no host here has a backup {backup_name!r}",
                            hint=f"backups on these hosts: {', '.join(known) or 'none'}")
    plans: list[VerifyPlan] = []
    without: dict[str, str] = {}
    for host in hosts:
        names = ", ".join(sorted(host.backups))
        if backup_name is not None and backup_name not in host.backups:
            without[host.name] = f"no backup {backup_name}" + (f" (it has {names})" if names else "")
        elif backup_name is None and len(host.backups) > 1:
            without[host.name] = f"several backups ({names}) and none named (--backup NAME)"
        else:
            plans.append(VerifyPlan.for_host(host, backup_name, send_probe=send_probe))
            continue
        plans.append(VerifyPlan(host, None, None, send_probe))
    return FleetPlan(plans, without)
