"""Verify, the plan: which checks a host gets, from its inventory entry and the backup chosen."""

from __future__ import annotations

from dataclasses import dataclass

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

