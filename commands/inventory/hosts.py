"""What the inventory describes: each host (address, service, backups, packages, its ssh settings) and the
whole ``Inventory`` with its groups expanded. HOST and BACKUP names typed by people are only looked up here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from commands.errors import UnknownBackup, UnknownHost
from commands.inventory.containers import (
    COMPOSE_PROJECT,
    COMPOSE_SERVICE,
    CONTAINER_KEYS,
    CONTAINER_MANAGERS,
    CONTAINER_PATTERN,
    Engine,
    cli_written,
    container_problem,
    engine_for,
)
from commands.inventory.schema import model, rules
from commands.inventory.settings import Approvals, FleetSettings, Limits, SshSettings, Strict, absolute_path, matching
from commands.ssh_config import defaults

if TYPE_CHECKING:  # loaded only for an inventory that writes them (Inventory.imported)
    from commands.inventory.policies import Applied, Policy
    from commands.inventory.watch import WatchEntry

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
UNIT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._:-]{0,250}$")


@model
class Probe(Strict):
    url: str
    json_body: dict[str, Any] = field(default_factory=dict, metadata=rules(alias="json"))
    timeout_s: float = field(default=30, metadata=rules(gt=0))
    expect: str | None = None
    # e.g. {Authorization: "Bearer ${SGLANG_API_KEY}"}: ${NAME} is read from proofbot's environment
    # when the probe is sent, so the token itself need not be in the inventory; never shown or logged.
    headers: dict[str, str] = field(default_factory=dict)


def _http_url(value: str, _: object = None) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http(s) URL as seen from the host, got {value!r}")
    return value


Probe.checks = {"url": (_http_url,)}


@model
class Service(Strict):
    manager: Literal["systemd", "supervisord", "docker", "podman", "compose"]
    # The unit (systemd) or program (supervisord); for a container manager, its `container:` (copied here).
    unit: str = ""
    health_url: str
    expect_flags: list[str] = field(default_factory=list)
    forbid_flags: list[str] = field(default_factory=list)
    ready_timeout_s: float = field(default=300, metadata=rules(gt=0))
    min_startup_s: float = field(default=0, metadata=rules(ge=0))
    probe: Probe | None = None
    supervisor_config: str | None = None
    # Container managers only (commands/inventory/containers.py): the container, its engine, and how long it must
    # run, not restarting, before it counts as up.
    container: str | None = None
    engine: Engine | None = None
    min_uptime_s: float = field(default=10, metadata=rules(ge=0))
    # manager: compose (commands/inventory/containers.py): the project and service whose labels find the container
    project: str | None = None
    service: str | None = None
    compose_file: str | None = None

    @classmethod
    def complete(cls, values: dict[str, Any], written: Mapping[str, Any]) -> None:
        keys = {key for key in written if key in CONTAINER_KEYS}
        problem = container_problem(values["manager"], values["container"], "unit" in written, keys)
        if problem:
            raise ValueError(problem)
        if values["container"] is not None and not values["unit"]:
            values["unit"] = values["container"]  # every message names the service by `unit`
        if values["project"] is not None and values["service"] is not None and not values["unit"]:
            values["unit"] = f"{values['project']}/{values['service']}"
        values["engine"] = engine_for(values["manager"], values["engine"], cli_written(written.get("engine")))


def _unit_name(value: str, data: dict[str, Any]) -> str:
    if data.get("manager") in CONTAINER_MANAGERS and not value:
        return value  # named by `container:`, judged there
    return matching(UNIT_PATTERN, value, "not a valid unit or program name")


def _optional(check: Any) -> Any:
    return (lambda value, _: None if value is None else check(value),)


Service.checks = {
    "unit": (_unit_name,),
    "container": _optional(lambda value: matching(CONTAINER_PATTERN, value, "not a valid container name")),
    "project": _optional(lambda value: matching(COMPOSE_PROJECT, value, "not a compose project name "
                                                "(docker-compose 1.29: lower case letters, digits, _ and -)")),
    "service": _optional(lambda value: matching(COMPOSE_SERVICE, value, "not a compose service name")),
    "compose_file": _optional(absolute_path),
    "health_url": (_http_url,),
    "supervisor_config": _optional(absolute_path),
}


@model
class Backup(Strict):
    dir: str
    files: dict[str, str]
    watch: list[str] = field(default_factory=list)
    # A restore into a dir (or a parent) that a user other than root and the SSH user can
    # write is refused at plan time; true accepts that risk for this backup only.
    allow_untrusted_dirs: bool = field(default=False, metadata=rules(strict=True))
    # A container service's file in the container's own layer (not bind-mounted) is restored only when this says
    # so: a recreate of the container loses it (commands/restore/into_container.py).
    into_container: bool = field(default=False, metadata=rules(strict=True))

    def backup_path(self, name: str) -> str:
        return f"{self.dir}/{name}"


def _files(value: dict[str, str], _: object) -> dict[str, str]:
    if not value:
        raise ValueError("a backup must list at least one file")
    for name, live in value.items():
        if "/" in name or name in (".", "..") or not name.strip():
            raise ValueError(f"file name {name!r} must be a plain name inside the backup dir")
        absolute_path(live)
    return value


Backup.checks = {"dir": (lambda value, _: absolute_path(value).rstrip("/") or "/",),
                 "files": (_files,),
                 "watch": (lambda value, _: [absolute_path(path).rstrip("/") or "/" for path in value],)}


DIST_PATTERN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")
DEB_PATTERN = re.compile(r"^[a-z0-9][a-z0-9+.-]{1,127}(:[a-z0-9][a-z0-9-]{0,31})?$")


@model
class Packages(Strict):
    """Installed packages to prove pristine with no backup: Python distributions by their own RECORD
    (``package:<dist>``), Debian packages by dpkg's md5sums (``package:deb:<name>``)."""

    # dists and deb come first so that python's check sees them (fields are validated in order).
    dists: list[str] = field(default_factory=list)
    deb: list[str] = field(default_factory=list)
    python: str | None = field(default=None, metadata=rules(validate_default=True))


def _python(value: str | None, data: dict[str, Any]) -> str | None:
    if value is None:
        if data.get("dists"):
            raise ValueError("required to check dists: the interpreter of their environment")
        return None
    return absolute_path(value)


def _dists(value: list[str], _: object) -> list[str]:
    """PEP 503 normalised (``Sgl_Kernel`` is ``sgl-kernel``), so a name reads the same everywhere."""
    names: list[str] = []
    for name in value:
        if not DIST_PATTERN.fullmatch(name):
            raise ValueError(f"not a distribution name: {name!r}")
        normalised = re.sub(r"[-_.]+", "-", name).lower()
        if normalised not in names:
            names.append(normalised)
    return names


def _deb(value: list[str], _: object) -> list[str]:
    """Debian policy's package names (lower case), optionally with dpkg's ``:arch`` qualifier."""
    for name in value:
        if not DEB_PATTERN.fullmatch(name):
            raise ValueError(f"not a Debian package name (optionally with :arch): {name!r}")
    return list(dict.fromkeys(value))


Packages.checks = {"python": (_python,), "dists": (_dists,), "deb": (_deb,)}


@model
class Host(Strict):
    name: str
    address: str
    port: int = field(default=22, metadata=rules(ge=1, le=65535))
    ssh: SshSettings
    # Filled in by the loader, never written: where each SSH value came from (`proofbot ping -v`).
    origins: dict[str, str] = field(default_factory=dict)
    service: Service | None = None
    backups: dict[str, Backup] = field(default_factory=dict)
    packages: Packages | None = None

    @classmethod
    def complete(cls, values: dict[str, Any], written: Mapping[str, Any]) -> None:
        named = [name for name, backup in values["backups"].items() if backup.into_container]
        service = values["service"]
        if named and (service is None or service.manager not in CONTAINER_MANAGERS):
            raise ValueError(f"backups {', '.join(named)}: `into_container` is only for a container service "
                             f"({', '.join(CONTAINER_MANAGERS)})")

    def backup(self, name: str | None) -> tuple[str, Backup]:
        """The named backup, or the only one; ambiguity and unknown names are usage errors."""
        known = ", ".join(sorted(self.backups)) or "none"
        if name is None:
            if len(self.backups) == 1:
                return next(iter(self.backups.items()))
            if not self.backups:
                raise UnknownBackup(f"host {self.name} has no backups in the inventory")
            raise UnknownBackup(
                f"host {self.name} has several backups: {known}",
                hint="name one, e.g. --backup " + sorted(self.backups)[0],
            )
        if name not in self.backups:
            raise UnknownBackup(f"unknown backup {name!r} for host {self.name}", hint=f"known: {known}")
        return name, self.backups[name]


Host.checks = {"address": (lambda value, _: matching(defaults.ADDRESS, value, "not a host name or IP address"),)}


ALL_GROUP = "all"


@model
class Inventory(Strict):
    path: str
    approvals: Approvals
    channels: list[str] | None = None
    # Who may approve what, where (first match wins); `approvals` + `channels` are the implicit last one.
    policies: tuple[Policy, ...] = ()
    fleet: FleetSettings = field(default_factory=FleetSettings)
    limits: Limits = field(default_factory=Limits)
    hosts: dict[str, Host]
    # Each group expanded to its host names, in the order written, each host once; `all` included.
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    watch: tuple[WatchEntry, ...] = ()  # the schedule of re-verifies (commands/inventory/watch.py)

    def host(self, name: str) -> Host:
        """One host by name; a group name here (a one-host command) is a usage error that says so."""
        if name in self.hosts:
            return self.hosts[name]
        if name in self.groups:
            count = len(self.groups[name])
            raise UnknownHost(f"{name!r} is a group of {count} host{'s' if count != 1 else ''}; "
                              "this command takes one host",
                              hint="hosts in it: " + ", ".join(self.groups[name][:10])
                              + (" …" if count > 10 else ""))
        raise UnknownHost(f"unknown host {name!r}", hint=self._known())

    def targets(self, names: list[str]) -> list[Host]:
        """Hosts named directly or through groups, in the order given, each host once."""
        chosen: dict[str, Host] = {}
        for name in names:
            if name in self.hosts:
                chosen.setdefault(name, self.hosts[name])
            elif name in self.groups:
                for member in self.groups[name]:
                    chosen.setdefault(member, self.hosts[member])
            else:
                raise UnknownHost(f"unknown host or group {name!r}", hint=self._known())
        return list(chosen.values())

    def policy(self, operation: str, hosts: list[str] | tuple[str, ...]) -> Applied:
        """The policy that applies to ``operation`` on ``hosts`` (the strictest of theirs over several)."""
        from commands.inventory.policies import Applied, implicit_policy, policy_for

        implicit = Applied(len(self.policies), implicit_policy(self.approvals, self.channels), True,
                           self.approvals.allow_self_approval)
        return policy_for(self.policies, implicit, self.groups, operation, hosts)

    def is_group(self, name: str) -> bool:
        return name in self.groups and name not in self.hosts

    def _known(self) -> str:
        hosts = ", ".join(sorted(self.hosts)) or "none"
        groups = ", ".join(sorted(self.groups))
        return f"known hosts: {hosts}; groups: {groups}"


Inventory.imported = {"Policy": "commands.inventory.policies", "WatchEntry": "commands.inventory.watch"}
