"""Inventory: the hosts, services and backups proofbot may touch, loaded and validated once.

HOST and BACKUP names typed by people are only ever looked up here; they never reach a
shell. A bad file is refused with the file, the key and what is wrong.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from commands.errors import InventoryError, UnknownBackup, UnknownHost
from commands.inventory_hints import unknown_key, yaml_error_at
from commands.ssh_config import resolve_entry

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
    # One file or several (as OpenSSH's `UserKnownHostsFile a b`): hashed names, [host]:port,
    # @cert-authority and @revoked lines are all honoured.
    known_hosts: str | list[str] = "~/.ssh/known_hosts"
    # OpenSSH's GlobalKnownHostsFile: read after the user's files (their @revoked lines count too).
    global_known_hosts: list[str] = Field(default_factory=lambda: ["/etc/ssh/ssh_known_hosts",
                                                                   "/etc/ssh/ssh_known_hosts2"])
    # OpenSSH's HostKeyAlias: the name looked up in known_hosts instead of the host's address.
    host_key_alias: str | None = None
    client_keys: list[str] = Field(default_factory=lambda: ["~/.ssh/id_ed25519"])
    # User certificates; a KEY-cert.pub beside a client key is used without being named here.
    client_certs: list[str] = Field(default_factory=list)
    # The operator's OpenSSH client config (opt-in): see commands/ssh_config.py for what is taken.
    config: str | None = None
    # Keys of the ssh-agent at SSH_AUTH_SOCK (opt-in); the agent is never forwarded.
    agent: bool = Field(default=False, strict=True)
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

    @field_validator("known_hosts", "global_known_hosts", "client_keys", "client_certs")
    @classmethod
    def _paths(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        paths = [value] if isinstance(value, str) else value
        if info.field_name == "known_hosts" and not paths:
            raise ValueError("name at least one known_hosts file: host keys are always checked")
        for path in paths:
            if not path or "\x00" in path or "\n" in path:
                raise ValueError(f"not a file path: {path!r}")
        return value

    def known_hosts_list(self) -> list[str]:
        return [self.known_hosts] if isinstance(self.known_hosts, str) else list(self.known_hosts)

    def known_hosts_path(self) -> Path:
        """The first known_hosts file (where a message names one)."""
        return Path(os.path.expanduser(self.known_hosts_list()[0]))

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


class Limits(_Strict):
    """Operations in flight started from Slack (README "Slack"): a fleet is one operation; its hosts'
    verifies draw from ``hosts``, shared by every fleet in flight."""

    per_user: int = Field(default=4, ge=1, le=1024)
    total: int = Field(default=16, ge=1, le=4096)
    hosts: int = Field(default=32, ge=1, le=4096)


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
    # Filled in by the loader, never written: where each SSH value came from (`proofbot ping -v`).
    origins: dict[str, str] = Field(default_factory=dict)
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
    limits: Limits = Field(default_factory=Limits)
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
    limits: Limits = Field(default_factory=Limits)
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


Path_ = tuple[str | int, ...]


@dataclass
class _Problems:
    """Every problem found in one inventory file, each with the line of the key it is about."""

    source: str
    lines: dict[Path_, int]
    found: list[tuple[Path_, str, str]] = field(default_factory=list)  # (YAML path, key as shown, message)

    def add(self, path: Path_, message: str, key: str | None = None) -> None:
        self.found.append((path, key if key is not None else _key_words(path), message))

    def add_validation(self, prefix: Path_, exc: ValidationError, model: type[BaseModel],
                       skip: Callable[[Path_], bool] = lambda _: False) -> None:
        for error in exc.errors():
            loc = tuple(error["loc"])
            if skip(loc):
                continue
            if error["type"] == "extra_forbidden":  # a typo, most often: say which key was meant
                self.add((*prefix, *loc), unknown_key(model, loc))
            else:
                self.add((*prefix, *loc), error["msg"].removeprefix("Value error, "))

    def add_raised(self, exc: InventoryError) -> None:
        """A problem raised as ``SOURCE: KEY: message`` (the hop parsers), recorded at its key."""
        key, _, message = exc.message.removeprefix(f"{self.source}: ").partition(": ")
        self.add(tuple(key.split(".")), message, key=key)

    def hops(self, path: Path_, written: object) -> list[_HopSpec]:
        """``jump`` as hops; a bad one is a problem at its key, and no hops."""
        try:
            return _jump_spec(self.source, _key_words(path), written)
        except InventoryError as exc:
            self.add_raised(exc)
            return []

    def line_of(self, path: Path_) -> int:
        """The line of the deepest key of ``path`` written in the file (a missing key: its parent's)."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return 1

    def raise_if_any(self) -> None:
        if not self.found:
            return
        problems: list[dict[str, object]] = [
            {"file": self.source, "line": self.line_of(path), "key": key, "message": message}
            for path, key, message in self.found]
        problems.sort(key=lambda problem: int(str(problem["line"])))
        lines = [f"{p['file']}:{p['line']}: {p['key']}: {p['message']}" for p in problems]
        hint = f"{len(problems)} problems in {self.source}" if len(problems) > 1 else ""
        raise InventoryError("\n".join(lines), hint=hint, problems=problems)


def _key_words(path: Path_) -> str:
    return ".".join(str(part) for part in path)


def _key_lines(node: yaml.Node, path: Path_, lines: dict[Path_, int],
               duplicates: list[tuple[Path_, int, int]]) -> None:
    """The 1-based line of every key (and sequence item) by its path; duplicate keys noted."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark.line)
            child = (*path, key)
            if child in lines:  # YAML keeps the last one written: its lines are the ones that count
                duplicates.append((child, lines[child], key_node.start_mark.line + 1))
                for stale in [known for known in lines if known[:len(child)] == child]:
                    del lines[stale]
            lines[child] = key_node.start_mark.line + 1
            _key_lines(value_node, child, lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.setdefault((*path, index), item.start_mark.line + 1)
            _key_lines(item, (*path, index), lines, duplicates)


# libyaml when PyYAML was built with it: one parse gives both the nodes (for line numbers) and
# the data, ~10x less CPU than parsing twice in pure Python (which a one-host verify felt).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _compose_and_load(text: str) -> tuple[yaml.Node | None, Any]:
    try:
        return _compose_and_load_with(_Loader, text)
    except yaml.YAMLError:
        # pure-Python PyYAML marks a syntax error where a person looks for it (libyaml marks the
        # end of the stream for an unclosed bracket): parse again to raise its error instead
        return _compose_and_load_with(yaml.SafeLoader, text)


def _compose_and_load_with(loader_class: Any, text: str) -> tuple[yaml.Node | None, Any]:
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        return root, (loader.construct_document(root) if root is not None else None)
    finally:
        loader.dispose()


def parse_inventory(text: str, source: str) -> Inventory:
    """Validate the whole file and raise one InventoryError listing every problem, each as
    ``FILE:LINE: KEY: what is wrong`` (a YAML syntax error as ``FILE:LINE:COL: not valid YAML: …``)."""
    try:
        root, raw = _compose_and_load(text)
    except yaml.MarkedYAMLError as exc:
        line, column, what = yaml_error_at(text, exc)
        raise InventoryError(f"{source}:{line}:{column}: not valid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"{source}:1:1: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise InventoryError(f"{source}:1: top level must be a mapping with a 'hosts' key")
    lines: dict[Path_, int] = {}
    duplicates: list[tuple[Path_, int, int]] = []
    if root is not None:
        _key_lines(root, (), lines, duplicates)
    problems = _Problems(source, lines)
    for path, first, again in duplicates:
        lines[(*path, "(again)")] = again
        problems.add((*path, "(again)"), f"written twice (first on line {first}); YAML keeps only the last",
                     key=_key_words(path))
    document = _document(raw, problems)
    top_ssh = dict(document.ssh)
    top_jump = ("ssh.jump", problems.hops(("ssh", "jump"), top_ssh.pop("jump", None)))
    top_ssh_problems: set[str] = set()
    try:
        SshSettings.model_validate(top_ssh)
    except ValidationError as exc:
        problems.add_validation(("ssh",), exc, SshSettings)
        top_ssh_problems = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
    jumps: dict[str, tuple[str, list[_HopSpec]]] = {}
    hosts = _hosts(document, top_ssh, problems, top_ssh_problems, jumps, top_jump)
    try:
        hosts = _resolve_jumps(source, hosts, jumps)
    except InventoryError as exc:
        problems.add_raised(exc)
    groups = _expand_groups(problems, document.groups, hosts, written_hosts=set(map(str, document.hosts)))
    problems.raise_if_any()
    return Inventory(path=source, approvals=document.approvals, channels=document.channels,
                     fleet=document.fleet, limits=document.limits, hosts=hosts, groups=groups)


def _document(raw: dict[str, Any], problems: _Problems) -> _InventoryFile:
    """The top level; a section that is wrong is reported and left out, so the others are still checked."""
    try:
        return _InventoryFile.model_validate(raw)
    except ValidationError as exc:
        problems.add_validation((), exc, _InventoryFile)
        bad = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
    kept = {key: value for key, value in raw.items() if key not in bad and key in _InventoryFile.model_fields}
    if "hosts" in bad and isinstance(raw.get("hosts"), dict):
        kept["hosts"] = {name: entry for name, entry in raw["hosts"].items()
                         if isinstance(name, str) and isinstance(entry, dict)}
    kept.setdefault("hosts", {})
    try:
        return _InventoryFile.model_validate(kept)
    except ValidationError:  # already reported above
        return _InventoryFile(hosts={})


def _hosts(document: _InventoryFile, top_ssh: dict[str, Any], problems: _Problems, top_ssh_problems: set[str],
           jumps: dict[str, tuple[str, list[_HopSpec]]], top_jump: tuple[str, list[_HopSpec]]) -> dict[str, Host]:
    """Each host validated with the top-level defaults merged in; its ``jump`` hops (as written) go to
    ``jumps`` for ``_resolve_jumps``."""
    hosts: dict[str, Host] = {}
    hop_cache: dict[tuple[Any, ...], Any] = {}  # a config bastion shared by many hosts is resolved once per load
    for name, entry in document.hosts.items():
        where: Path_ = ("hosts", str(name))
        if not NAME_PATTERN.fullmatch(str(name)):
            problems.add(where, "host names are letters, digits, '.', '_', '-'")
            continue
        if not isinstance(entry, dict):
            problems.add(where, "must be a mapping")
            continue
        own_ssh = entry.get("ssh") or {}
        if isinstance(own_ssh, dict) and "max_connections" in own_ssh:
            problems.add((*where, "ssh", "max_connections"), "a bound on the whole bot, "
                         "set it in the top-level ssh section only")
            own_ssh = {key: value for key, value in own_ssh.items() if key != "max_connections"}
        loader_only = [key for key in ("origins",) if key in entry]
        for key in loader_only:
            problems.add((*where, key), "not an inventory key (proofbot fills it in)")
        if not isinstance(own_ssh, dict):
            problems.add((*where, "ssh"), "must be a mapping")
        if loader_only or not isinstance(own_ssh, dict):
            continue
        jumps[str(name)] = top_jump
        # A jump the inventory writes (`[]` too) wins over the ssh config's ProxyJump, as every value does.
        jump_written = f"hosts.{name}.ssh.jump" if "jump" in own_ssh else "ssh.jump" if "jump" in document.ssh else None
        if "jump" in own_ssh:
            own_ssh = dict(own_ssh)
            jumps[str(name)] = (f"hosts.{name}.ssh.jump", problems.hops((*where, "ssh", "jump"), own_ssh.pop("jump")))
        try:
            merged, config_hops = resolve_entry(str(name), entry, top_ssh, own_ssh, problems.source, jump_written,
                                                hop_cache)
        except InventoryError as exc:  # the operator's ssh config: its file and line are in the message
            problems.add_raised(exc)
            continue
        if config_hops:
            # The config's ProxyJump becomes this host's ssh.jump: the same shared bastion connection.
            jumps[str(name)] = (f"hosts.{name}", [_HopSpec(hop["name"], None, hop["alias"], None, hop)
                                                  for hop in config_hops])
        # packages merge key by key like ssh: a host may name its own python or dists.
        own = entry.get("packages")
        if isinstance(own, dict) or (own is None and document.packages):
            merged["packages"] = {**document.packages, **(own or {})}

        def inherited(loc: Path_, own_ssh: Any = own_ssh) -> bool:
            # said once, at the top-level ssh key, not again for every host that inherits it
            return (len(loc) >= 2 and loc[0] == "ssh" and str(loc[1]) in top_ssh_problems
                    and not (isinstance(own_ssh, dict) and loc[1] in own_ssh))

        try:
            host = Host.model_validate(merged)
        except ValidationError as exc:
            problems.add_validation(where, exc, Host, skip=inherited)
            continue
        bad_backups = [backup for backup in host.backups if not NAME_PATTERN.fullmatch(backup)]
        for backup_name in bad_backups:
            problems.add((*where, "backups", backup_name), "bad backup name")
        if not bad_backups:
            hosts[str(name)] = host
    return hosts


def _expand_groups(problems: _Problems, written: dict[str, list[str]], hosts: dict[str, Host], *,
                   written_hosts: set[str]) -> dict[str, tuple[str, ...]]:
    """Each group as host names: members may be hosts or groups; unknown names and cycles are
    reported (a member that is a host with problems of its own is not reported again)."""
    if ALL_GROUP in written_hosts:
        problems.add(("hosts", ALL_GROUP), f"'{ALL_GROUP}' is the implicit group of every host; "
                     "name the host otherwise")
    usable: dict[str, list[str]] = {}
    for name, members in written.items():
        where: Path_ = ("groups", str(name))
        if name == ALL_GROUP:
            problems.add(where, f"'{ALL_GROUP}' is implicit (every host); remove it or give the group another name")
        elif not NAME_PATTERN.fullmatch(str(name)):
            problems.add(where, "group names are letters, digits, '.', '_', '-'")
        elif name in written_hosts:
            problems.add(where, "a host has the same name; a host and a group may not share a name")
        else:
            usable[name] = members
        for index, member in enumerate(members):
            if member not in written_hosts and member not in written and member != ALL_GROUP:
                problems.add((*where, index), f"unknown host or group {member!r}", key=f"groups.{name}[{index}]")

    expanded: dict[str, tuple[str, ...]] = {ALL_GROUP: tuple(hosts)}
    cycles: set[str] = set()

    def expand(name: str, path: tuple[str, ...]) -> tuple[str, ...]:
        if name in expanded:
            return expanded[name]
        if name in path:
            cycle = " -> ".join((*path[path.index(name):], name))
            if path[-1] not in cycles:
                cycles.add(path[-1])
                problems.add(("groups", path[-1]), f"groups form a cycle: {cycle}")
            return ()
        members: dict[str, None] = {}
        for member in usable.get(name, []):
            if member in hosts:
                members[member] = None
            elif member in usable:
                members.update(dict.fromkeys(expand(member, (*path, name))))
        expanded[name] = tuple(members)
        return expanded[name]

    for name in usable:
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
    # A ProxyJump hop of the ssh config, resolved through it: address, port and what it changes of
    # the host's ssh settings (commands/ssh_config.py ``_hops``).
    config: Mapping[str, Any] | None = None


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
            if spec.config is not None:  # resolved through the ssh config; `host` is its alias there
                hops.append(Hop(name=spec.written, address=spec.config["address"], port=spec.config["port"],
                                ssh=host.ssh.model_copy(update={**spec.config["ssh"], "jump": ()})))
                continue
            known = hosts.get(spec.host)
            settings = known.ssh if known is not None else host.ssh
            update: dict[str, Any] = {"jump": ()}
            if known is None:  # ssh -J never passes -o HostKeyAlias on to a hop: it is looked up by its address
                update["host_key_alias"] = None
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
