"""Inventory: the hosts, services and backups proofbot may touch, loaded and validated once.

HOST and BACKUP names typed by people are only ever looked up here; they never reach a
shell. A bad file is refused with the file, the key and what is wrong.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from commands.errors import InventoryError, UnknownBackup, UnknownHost

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
UNIT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._:-]{0,250}$")
INVENTORY_ENV = "PROOFBOT_INVENTORY"
DEFAULT_INVENTORY = "inventory.yml"


def _absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path, got {value!r}")
    if "\x00" in value or "\n" in value:
        raise ValueError("must not contain NUL or newline characters")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SshSettings(_Strict):
    user: str = "root"
    known_hosts: str = "~/.ssh/known_hosts"
    client_keys: list[str] = Field(default_factory=lambda: ["~/.ssh/id_ed25519"])
    connect_timeout_s: float = Field(default=10, gt=0)
    command_timeout_s: float = Field(default=60, gt=0)
    # SSH connections open at once across all hosts (one per host however many operations overlap).
    max_connections: int = Field(default=32, ge=1, le=4096)
    # The hops to the host (ProxyJump), resolved at load from `jump:` (see _resolve_jumps).
    jump: tuple[Hop, ...] = ()
    # OpenSSH's defaults: MaxStartups 10 (unauthenticated connections per sshd) and MaxSessions 10.
    max_startups: int = Field(default=10, ge=1, le=1024)
    max_sessions: int = Field(default=10, ge=1, le=1024)

    @field_validator("user")
    @classmethod
    def _user_is_a_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", value):
            raise ValueError(f"not a valid user name: {value!r}")
        return value

    def known_hosts_path(self) -> Path:
        return Path(os.path.expanduser(self.known_hosts))

    def client_key_paths(self) -> list[Path]:
        return [Path(os.path.expanduser(key)) for key in self.client_keys]


class Hop(_Strict):
    """One hop of ``ssh.jump``: where it is and how to log in; ``name`` is how messages call it."""

    name: str  # an inventory host's name, or the hop as written (user@address:port)
    address: str
    port: int = Field(ge=1, le=65535)
    ssh: SshSettings  # the inventory host's own settings, or the host's; jump always empty


SshSettings.model_rebuild()


class FleetSettings(_Strict):
    """How many hosts are worked on at once, and how long one host may take."""

    max_parallel: int = Field(default=32, ge=1, le=4096)
    # One host that hangs is reported "timed out after N s" and never holds the others.
    host_deadline_s: float = Field(default=120, gt=0)
    # Rolling restart: hosts restarted (and proven) at a time.
    restart_batch: int = Field(default=1, ge=1, le=4096)


class Approvals(_Strict):
    approvers: list[str] = Field(default_factory=list)
    allow_self_approval: bool = False
    expire_after_s: float = Field(default=900, gt=0)


class Probe(_Strict):
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


class Service(_Strict):
    manager: Literal["systemd", "supervisord"]
    unit: str
    health_url: str
    expect_flags: list[str] = Field(default_factory=list)
    forbid_flags: list[str] = Field(default_factory=list)
    ready_timeout_s: float = Field(default=300, gt=0)
    min_startup_s: float = Field(default=0, ge=0)
    probe: Probe | None = None
    supervisor_config: str | None = None

    @field_validator("unit")
    @classmethod
    def _unit_name(cls, value: str) -> str:
        if not UNIT_PATTERN.fullmatch(value):
            raise ValueError(f"not a valid unit or program name: {value!r}")
        return value

    @field_validator("health_url")
    @classmethod
    def _health_url(cls, value: str) -> str:
        return _http_url(value)

    @field_validator("supervisor_config")
    @classmethod
    def _config_path(cls, value: str | None) -> str | None:
        return None if value is None else _absolute_path(value)


class Backup(_Strict):
    dir: str
    files: dict[str, str]
    watch: list[str] = Field(default_factory=list)
    # A restore into a dir (or a parent) that a user other than root and the SSH user can
    # write is refused at plan time; true accepts that risk for this backup only.
    allow_untrusted_dirs: bool = Field(default=False, strict=True)

    @field_validator("dir")
    @classmethod
    def _dir(cls, value: str) -> str:
        return _absolute_path(value).rstrip("/") or "/"

    @field_validator("files")
    @classmethod
    def _files(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("a backup must list at least one file")
        for name, live in value.items():
            if "/" in name or name in (".", "..") or not name.strip():
                raise ValueError(f"file name {name!r} must be a plain name inside the backup dir")
            _absolute_path(live)
        return value

    @field_validator("watch")
    @classmethod
    def _watch(cls, value: list[str]) -> list[str]:
        return [_absolute_path(path).rstrip("/") or "/" for path in value]

    def backup_path(self, name: str) -> str:
        return f"{self.dir}/{name}"


DIST_PATTERN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")
DEB_PATTERN = re.compile(r"^[a-z0-9][a-z0-9+.-]{1,127}(:[a-z0-9][a-z0-9-]{0,31})?$")


class Packages(_Strict):
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
        return _absolute_path(value)

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


class Host(_Strict):
    name: str
    address: str
    port: int = Field(default=22, ge=1, le=65535)
    ssh: SshSettings
    service: Service | None = None
    backups: dict[str, Backup] = Field(default_factory=dict)
    packages: Packages | None = None

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9.:-]{1,253}", value):
            raise ValueError(f"not a host name or IP address: {value!r}")
        return value

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


class Inventory(_Strict):
    path: str
    approvals: Approvals
    channels: list[str] | None = None
    fleet: FleetSettings = Field(default_factory=FleetSettings)
    hosts: dict[str, Host]
    # Each group expanded to its host names, in the order written, each host once; `all` included.
    groups: dict[str, tuple[str, ...]] = Field(default_factory=dict)

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

    def is_group(self, name: str) -> bool:
        return name in self.groups and name not in self.hosts

    def _known(self) -> str:
        hosts = ", ".join(sorted(self.hosts)) or "none"
        groups = ", ".join(sorted(self.groups))
        return f"known hosts: {hosts}; groups: {groups}"


class _InventoryFile(_Strict):
    ssh: dict[str, Any] = Field(default_factory=dict)
    approvals: Approvals = Field(default_factory=Approvals)
    channels: list[str] | None = None
    fleet: FleetSettings = Field(default_factory=FleetSettings)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    packages: dict[str, Any] = Field(default_factory=dict)
    hosts: dict[str, dict[str, Any]]


def inventory_path(explicit: str | None) -> Path:
    return Path(explicit or os.environ.get(INVENTORY_ENV) or DEFAULT_INVENTORY)


def load_inventory(path: Path) -> Inventory:
    """Read and validate the inventory; every problem names the file and the key."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(
            f"{path}: inventory file not found",
            hint=f"pass --inventory PATH or set {INVENTORY_ENV}",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"{path}: cannot read inventory: {exc}") from None
    return parse_inventory(text, str(path))


def parse_inventory(text: str, source: str) -> Inventory:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InventoryError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise InventoryError(f"{source}: top level must be a mapping with a 'hosts' key")
    try:
        document = _InventoryFile.model_validate(raw)
    except ValidationError as exc:
        raise InventoryError(_describe(source, exc, prefix="")) from None
    top_ssh = dict(document.ssh)
    jumps: dict[str, tuple[str, list[_HopSpec]]] = {}
    top_jump = ("ssh.jump", _jump_spec(source, "ssh.jump", top_ssh.pop("jump", None)))
    try:
        SshSettings.model_validate(top_ssh)
    except ValidationError as exc:
        raise InventoryError(_describe(source, exc, prefix="ssh.")) from None
    hosts: dict[str, Host] = {}
    for name, entry in document.hosts.items():
        if not NAME_PATTERN.fullmatch(str(name)):
            raise InventoryError(f"{source}: hosts.{name}: host names are letters, digits, '.', '_', '-'")
        if not isinstance(entry, dict):
            raise InventoryError(f"{source}: hosts.{name}: must be a mapping")
        own_ssh = entry.get("ssh") or {}
        if isinstance(own_ssh, dict) and "max_connections" in own_ssh:
            raise InventoryError(f"{source}: hosts.{name}.ssh.max_connections: a bound on the whole bot, "
                                 "set it in the top-level ssh section only")
        jumps[str(name)] = top_jump
        if isinstance(own_ssh, dict) and "jump" in own_ssh:
            own_ssh = dict(own_ssh)
            key = f"hosts.{name}.ssh.jump"
            jumps[str(name)] = (key, _jump_spec(source, key, own_ssh.pop("jump")))
        merged_ssh = {**top_ssh, **own_ssh}
        merged = {**entry, "name": str(name), "ssh": merged_ssh}
        # packages merge key by key like ssh: a host may name its own python or dists.
        own = entry.get("packages")
        if isinstance(own, dict) or (own is None and document.packages):
            merged["packages"] = {**document.packages, **(own or {})}
        try:
            hosts[str(name)] = Host.model_validate(merged)
        except ValidationError as exc:
            raise InventoryError(_describe(source, exc, prefix=f"hosts.{name}.")) from None
        for backup_name in hosts[str(name)].backups:
            if not NAME_PATTERN.fullmatch(backup_name):
                raise InventoryError(f"{source}: hosts.{name}.backups.{backup_name}: bad backup name")
    hosts = _resolve_jumps(source, hosts, jumps)
    groups = _expand_groups(source, document.groups, hosts)
    return Inventory(path=source, approvals=document.approvals, channels=document.channels,
                     fleet=document.fleet, hosts=hosts, groups=groups)


def _expand_groups(source: str, written: dict[str, list[str]], hosts: dict[str, Host]
                   ) -> dict[str, tuple[str, ...]]:
    """Each group as host names: members may be hosts or groups; unknown names and cycles are refused."""
    if ALL_GROUP in hosts:
        raise InventoryError(f"{source}: hosts.{ALL_GROUP}: '{ALL_GROUP}' is the implicit group of every "
                             "host; name the host otherwise")
    for name, members in written.items():
        if name == ALL_GROUP:
            raise InventoryError(f"{source}: groups.{ALL_GROUP}: '{ALL_GROUP}' is implicit (every host); "
                                 "remove it or give the group another name")
        if not NAME_PATTERN.fullmatch(str(name)):
            raise InventoryError(f"{source}: groups.{name}: group names are letters, digits, '.', '_', '-'")
        if name in hosts:
            raise InventoryError(f"{source}: groups.{name}: a host has the same name; "
                                 "a host and a group may not share a name")
        for index, member in enumerate(members):
            if member not in hosts and member not in written and member != ALL_GROUP:
                raise InventoryError(f"{source}: groups.{name}[{index}]: unknown host or group {member!r}")

    expanded: dict[str, tuple[str, ...]] = {ALL_GROUP: tuple(hosts)}

    def expand(name: str, path: tuple[str, ...]) -> tuple[str, ...]:
        if name in expanded:
            return expanded[name]
        if name in path:
            cycle = " -> ".join((*path[path.index(name):], name))
            raise InventoryError(f"{source}: groups.{path[-1]}: groups form a cycle: {cycle}")
        members: dict[str, None] = {}
        for member in written[name]:
            for host in ((member,) if member in hosts else expand(member, (*path, name))):
                members[host] = None
        expanded[name] = tuple(members)
        return expanded[name]

    for name in written:
        expand(name, ())
    return expanded


MAX_HOPS = 8
USER_PATTERN = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
ADDRESS_PATTERN = re.compile(r"[A-Za-z0-9.:-]{1,253}")
_HOP = re.compile(r"(?:(?P<user>[^@]*)@)?(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]]*))(?::(?P<port>[^:]*))?")


@dataclass(frozen=True)
class _HopSpec:
    """One hop as written: ``[user@]host[:port]``, host an inventory host's name or an address."""

    written: str
    user: str | None
    host: str
    port: int | None


def _jump_spec(source: str, key: str, value: object) -> list[_HopSpec]:
    """``jump`` as written (a string, ``a,b`` a chain, or a list of such) as hops; bad input names key."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise InventoryError(f"{source}: {key}: a hop (`bastion`, `user@host:port`), `a,b` for a chain, "
                             "or a list of hops")
    parts = [part.strip() for item in items for part in item.split(",") if item.strip()]
    if len(parts) > MAX_HOPS:
        raise InventoryError(f"{source}: {key}: at most {MAX_HOPS} hops, got {len(parts)}")
    return [_hop_spec(source, key, part) for part in parts]


def _hop_spec(source: str, key: str, written: str) -> _HopSpec:
    user, at, rest = written.rpartition("@")
    if at and not USER_PATTERN.fullmatch(user):
        raise InventoryError(f"{source}: {key}: not a valid user name in hop {written!r}")
    if rest.count(":") > 1 and not rest.startswith("["):
        host, port_text = rest, ""  # a bare IPv6 address: no port can be told apart
    else:
        match = _HOP.fullmatch(rest)
        host = (match.group("v6") or match.group("host") or "") if match else ""
        port_text = (match.group("port") or "") if match else "?"
        if match and match.group("port") is not None and not port_text:
            port_text = "?"
    if not ADDRESS_PATTERN.fullmatch(host):
        raise InventoryError(f"{source}: {key}: hop {written!r} is not `host`, `user@host:port` or `[v6]:port`")
    port = int(port_text) if port_text.isdigit() and len(port_text) <= 5 else None
    if port_text and (port is None or not 1 <= port <= 65535):
        raise InventoryError(f"{source}: {key}: hop {written!r}: the port must be 1-65535")
    return _HopSpec(written, user or None, host, port)


def _resolve_jumps(source: str, hosts: dict[str, Host], jumps: dict[str, tuple[str, list[_HopSpec]]]
                   ) -> dict[str, Host]:
    """Each host with its hops resolved: an inventory host's name brings that host's address, port and
    SSH settings (its own jump is not followed: the chain written is the whole path); anything else is
    an address reached with the host's own settings. A host met in its own chain is reached through
    the hops before it, so `jump: bastion` in the defaults does not loop on the bastion itself."""
    resolved: dict[str, Host] = {}
    for name, host in hosts.items():
        key, specs = jumps[name]
        hops: list[Hop] = []
        for spec in specs:
            if spec.host == name:
                break
            known = hosts.get(spec.host)
            settings = known.ssh if known is not None else host.ssh
            update: dict[str, Any] = {"jump": ()}
            if spec.user:
                update["user"] = spec.user
            hops.append(Hop(
                name=spec.host if known is not None and spec.written == spec.host else spec.written,
                address=known.address if known is not None else spec.host,
                port=spec.port or (known.port if known is not None else 22),
                ssh=settings.model_copy(update=update)))
        if len({(hop.address, hop.port) for hop in hops}) < len(hops):
            raise InventoryError(f"{source}: {key}: a hop is listed twice in {name}'s chain")
        resolved[name] = host.model_copy(update={"ssh": host.ssh.model_copy(update={"jump": tuple(hops)})})
    return resolved


def _describe(source: str, exc: ValidationError, prefix: str) -> str:
    first = exc.errors()[0]
    key = prefix + ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    more = exc.error_count() - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{source}: {key}: {message}{tail}"
