"""Verify, the plan: which checks a host gets, from its inventory entry and the backup chosen."""

from __future__ import annotations

from dataclasses import dataclass

from commands.errors import UnknownBackup, UsageError
from commands.inventory import Backup, Host
from commands.inventory.check import NOTHING_TO_CHECK, nothing_configured


@dataclass(frozen=True)
class VerifyPlan:
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

    def check_names(self) -> list[str]:
        names = [f"file:{name}" for name in self.backup.files] if self.backup else []
        if self.backup and self.backup.watch:
            names.append("extra-files")
        names += self.package_checks()  # in the order the findings come
        if self.host.service:
            names += ["main-pid", "health", "cmdline"]
            if self.backup:
                names.append("stale-process")
            if self.host.service.probe:
                names.append("probe")
        return names

    def package_checks(self) -> list[str]:
        packages = self.host.packages
        if not packages:
            return []
        return [f"package:{dist}" for dist in packages.dists] + [f"package:deb:{name}" for name in packages.deb]


@dataclass(frozen=True)
class FleetPlan:
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
