"""What the inventory describes: each host (address, service, backups, packages, its ssh settings) and the
whole ``Inventory`` with its groups expanded. HOST and BACKUP names typed by people are only looked up here."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from commands.errors import UnknownBackup, UnknownHost
from commands.inventory.containers import (
    COMPOSE_PROJECT,
    COMPOSE_SERVICE,
    CONTAINER_KEYS,
    CONTAINER_MANAGERS,
    CONTAINER_PATTERN,
    Engine,
    container_problem,
    engine_for,
)
from commands.inventory.policies import Applied, Policy, implicit_policy, policy_for
from commands.inventory.settings import Approvals, FleetSettings, Limits, SshSettings, Strict, absolute_path, matching
from commands.inventory.watch import WatchEntry
from commands.ssh_config import defaults

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
UNIT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._:-]{0,250}$")


class Probe(Strict):
    url: str
    json_body: dict[str, Any] = Field(default_factory=dict, alias="json")
    timeout_s: float = Field(default=30, gt=0)
    expect: str | None = None
    # e.g. {Authorization: "Bearer ${SGLANG_API_KEY}"}: ${NAME} is read from proofbot's environment
    # when the probe is sent, so the token itself need not be in the inventory; never shown or logged.
    headers: dict[str, str] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _http_url(value)


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be an http(s) URL as seen from the host, got {value!r}")
    return value


class Service(Strict):
    manager: Literal["systemd", "supervisord", "docker", "podman", "compose"]
    # The unit (systemd) or program (supervisord); for a container manager, its `container:` (copied here).
    unit: str = ""
    health_url: str
    expect_flags: list[str] = Field(default_factory=list)
    forbid_flags: list[str] = Field(default_factory=list)
    ready_timeout_s: float = Field(default=300, gt=0)
    min_startup_s: float = Field(default=0, ge=0)
    probe: Probe | None = None
    supervisor_config: str | None = None
    # Container managers only (commands/inventory/containers.py): the container, its engine, and how long it must
    # run, not restarting, before it counts as up.
    container: str | None = None
    engine: Engine | None = None
    min_uptime_s: float = Field(default=10, ge=0)
    # manager: compose (commands/inventory/containers.py): the project and service whose labels find the container
    project: str | None = None
    service: str | None = None
    compose_file: str | None = None

    @field_validator("unit")
    @classmethod
    def _unit_name(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("manager") in CONTAINER_MANAGERS and not value:
            return value  # named by `container:`, judged there
        return matching(UNIT_PATTERN, value, "not a valid unit or program name")

    @field_validator("container")
    @classmethod
    def _container_name(cls, value: str | None) -> str | None:
        return None if value is None else matching(CONTAINER_PATTERN, value, "not a valid container name")

    @field_validator("project")
    @classmethod
    def _project(cls, value: str | None) -> str | None:
        return None if value is None else matching(COMPOSE_PROJECT, value, "not a compose project name "
                                                   "(docker-compose 1.29: lower case letters, digits, _ and -)")

    @field_validator("service")
    @classmethod
    def _compose_service(cls, value: str | None) -> str | None:
        return None if value is None else matching(COMPOSE_SERVICE, value, "not a compose service name")

    @field_validator("compose_file")
    @classmethod
    def _compose_file(cls, value: str | None) -> str | None:
        return None if value is None else absolute_path(value)

    @model_validator(mode="after")
    def _container_keys(self) -> Service:
        written = {key for key in self.model_fields_set if key in CONTAINER_KEYS}
        problem = container_problem(self.manager, self.container, "unit" in self.model_fields_set, written)
        if problem:
            raise ValueError(problem)
        if self.container is not None and not self.unit:
            object.__setattr__(self, "unit", self.container)  # every message names the service by `unit`
        if self.project is not None and self.service is not None and not self.unit:
            object.__setattr__(self, "unit", f"{self.project}/{self.service}")
        object.__setattr__(self, "engine", engine_for(self.manager, self.engine))
        return self

    @field_validator("health_url")
    @classmethod
    def _health_url(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("supervisor_config")
    @classmethod
    def _config_path(cls, value: str | None) -> str | None:
        return None if value is None else absolute_path(value)


class Backup(Strict):
    dir: str
    files: dict[str, str]
    watch: list[str] = Field(default_factory=list)
    # A restore into a dir (or a parent) that a user other than root and the SSH user can
    # write is refused at plan time; true accepts that risk for this backup only.
    allow_untrusted_dirs: bool = Field(default=False, strict=True)
    # A container service's file in the container's own layer (not bind-mounted) is restored only when this says
    # so: a recreate of the container loses it (commands/restore/into_container.py).
    into_container: bool = Field(default=False, strict=True)

    @field_validator("dir")
    @classmethod
    def _dir(cls, value: str) -> str:
        return absolute_path(value).rstrip("/") or "/"

    @field_validator("files")
    @classmethod
    def _files(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("a backup must list at least one file")
        for name, live in value.items():
            if "/" in name or name in (".", "..") or not name.strip():
                raise ValueError(f"file name {name!r} must be a plain name inside the backup dir")
            absolute_path(live)
        return value

    @field_validator("watch")
    @classmethod
    def _watch(cls, value: list[str]) -> list[str]:
        return [absolute_path(path).rstrip("/") or "/" for path in value]

    def backup_path(self, name: str) -> str:
        return f"{self.dir}/{name}"


DIST_PATTERN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")
DEB_PATTERN = re.compile(r"^[a-z0-9][a-z0-9+.-]{1,127}(:[a-z0-9][a-z0-9-]{0,31})?$")


class Packages(Strict):
    """Installed packages to prove pristine with no backup: Python distributions by their own RECORD
    (``package:<dist>``), Debian packages by dpkg's md5sums (``package:deb:<name>``)."""

    # dists and deb come first so that python's validator sees them (pydantic validates in order).
    dists: list[str] = Field(default_factory=list)
    deb: list[str] = Field(default_factory=list)
    python: str | None = Field(default=None, validate_default=True)

    @field_validator("python")
    @classmethod
    def _python(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            if info.data.get("dists"):
                raise ValueError("required to check dists: the interpreter of their environment")
            return None
        return absolute_path(value)

    @field_validator("dists")
    @classmethod
    def _dists(cls, value: list[str]) -> list[str]:
        """PEP 503 normalised (``Sgl_Kernel`` is ``sgl-kernel``), so a name reads the same everywhere."""
        names: list[str] = []
        for name in value:
            if not DIST_PATTERN.fullmatch(name):
                raise ValueError(f"not a distribution name: {name!r}")
            normalised = re.sub(r"[-_.]+", "-", name).lower()
            if normalised not in names:
                names.append(normalised)
        return names

    @field_validator("deb")
    @classmethod
    def _deb(cls, value: list[str]) -> list[str]:
        """Debian policy's package names (lower case), optionally with dpkg's ``:arch`` qualifier."""
        for name in value:
            if not DEB_PATTERN.fullmatch(name):
                raise ValueError(f"not a Debian package name (optionally with :arch): {name!r}")
        return list(dict.fromkeys(value))


class Host(Strict):
    name: str
    address: str
    port: int = Field(default=22, ge=1, le=65535)
    ssh: SshSettings
    # Filled in by the loader, never written: where each SSH value came from (`proofbot ping -v`).
    origins: dict[str, str] = Field(default_factory=dict)
    service: Service | None = None
    backups: dict[str, Backup] = Field(default_factory=dict)
    packages: Packages | None = None

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        return matching(defaults.ADDRESS, value, "not a host name or IP address")

    @model_validator(mode="after")
    def _into_container(self) -> Host:
        named = [name for name, backup in self.backups.items() if backup.into_container]
        if named and (self.service is None or self.service.manager not in CONTAINER_MANAGERS):
            raise ValueError(f"backups {', '.join(named)}: `into_container` is only for a container service "
                             f"({', '.join(CONTAINER_MANAGERS)})")
        return self

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


ALL_GROUP = "all"


class Inventory(Strict):
    path: str
    approvals: Approvals
    channels: list[str] | None = None
    # Who may approve what, where (first match wins); `approvals` + `channels` are the implicit last one.
    policies: tuple[Policy, ...] = ()
    fleet: FleetSettings = Field(default_factory=FleetSettings)
    limits: Limits = Field(default_factory=Limits)
    hosts: dict[str, Host]
    # Each group expanded to its host names, in the order written, each host once; `all` included.
    groups: dict[str, tuple[str, ...]] = Field(default_factory=dict)
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
        implicit = Applied(len(self.policies), implicit_policy(self.approvals, self.channels), True,
                           self.approvals.allow_self_approval)
        return policy_for(self.policies, implicit, self.groups, operation, hosts)

    def is_group(self, name: str) -> bool:
        return name in self.groups and name not in self.hosts

    def _known(self) -> str:
        hosts = ", ".join(sorted(self.hosts)) or "none"
        groups = ", ".join(sorted(self.groups))
        return f"known hosts: {hosts}; groups: {groups}"
