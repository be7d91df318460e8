"""Verify, the plan: which checks a host gets, from its inventory entry and the backup chosen."""

from __future__ import annotations

from dataclasses import dataclass

from commands.errors import UnknownBackup
from commands.inventory import Backup, Host


@dataclass(frozen=True)
class VerifyPlan:
    host: Host
    backup_name: str | None
    backup: Backup | None
    send_probe: bool = True  # False: the probe is reported ``skipped``, never sent

    @classmethod
    def for_host(cls, host: Host, backup_name: str | None, *, send_probe: bool = True) -> VerifyPlan:
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
    """One verify plan per host, and for the hosts whose files are not compared, why (said plainly)."""

    plans: list[VerifyPlan]
    left_out: dict[str, str]  # host -> "no backup 'pre-ddtree'": the same words for every host it applies to


def plan_in_fleet(host: Host, backup_name: str | None) -> tuple[VerifyPlan, str | None]:
    """The host's plan with the backup asked for, or without file checks and the reason, when the host
    has no such backup (or several and none was named): one host's inventory never stops a fleet."""
    if backup_name is not None and backup_name not in host.backups:
        return VerifyPlan(host, None, None), f"no backup {backup_name!r}: files not compared"
    if backup_name is None and len(host.backups) > 1:
        return VerifyPlan(host, None, None), "several backups, none named: files not compared"
    return VerifyPlan.for_host(host, backup_name), None


def fleet_plan(hosts: list[Host], backup_name: str | None) -> FleetPlan:
    """Plans for a fleet; a backup that no host has is refused (it is likely a typo)."""
    if backup_name is not None and not any(backup_name in host.backups for host in hosts):
        raise UnknownBackup(f"no host among the {len(hosts)} named has a backup {backup_name!r}, and it is not "
                            "a host or group either",
                            hint="backups: " + (", ".join(sorted({b for h in hosts for b in h.backups})) or "none"))
    plans, left_out = [], {}
    for host in hosts:
        plan, reason = plan_in_fleet(host, backup_name)
        plans.append(plan)
        if reason:
            left_out[host.name] = reason
    return FleetPlan(plans, left_out)
