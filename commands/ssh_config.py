"""The operator's OpenSSH client config (``ssh.config``, opt-in), read at inventory load.

``resolve_entry`` fills a host entry's SSH values (address, port, user, identity files,
certificates, known_hosts files, jump hops) from what the inventory writes, then, only with
``ssh.config`` set, from that config, then defaults; each value keeps its origin
(``Host.origins``) for ``proofbot ping -v``. A value written in the inventory (the host entry or
the file's top-level ``ssh``) always wins; a default never overrides the config. The config's
``ProxyJump`` comes back as hops already resolved through the same config, which the inventory
loader turns into ``ssh.jump`` hops: a config bastion is then reached exactly like an inventory
one (one shared connection, commands/ssh.py).

The file is parsed by asyncssh's own OpenSSH parser (a local file, no SSH: the one asyncssh
import the pure-parser contract allows, in pyproject.toml), but only a whitelist of its
options is taken (``TAKEN``): everything else it may say (``StrictHostKeyChecking no``,
``ForwardAgent yes``, ``RemoteCommand`` …) has no effect, because proofbot never passes the file
to asyncssh. What would make proofbot run a command as root (``ProxyCommand``, ``Match exec``)
or stop checking host keys (``UserKnownHostsFile /dev/null``) is refused with the file and line.
The config must be owned by root or this user and writable by no one else (as OpenSSH demands):
it names the known_hosts files that decide which host keys are trusted.
"""

from __future__ import annotations

import getpass
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncssh.config import SSHClientConfig

from commands.errors import InventoryError

# OpenSSH option (as asyncssh names it) -> the inventory value it gives.
TAKEN = {"Hostname": "address", "Port": "port", "User": "user", "IdentityFile": "client_keys",
         "CertificateFile": "client_certs", "UserKnownHostsFile": "known_hosts", "ProxyJump": "jump"}
DEFAULTS: dict[str, Any] = {"port": 22, "user": "root", "known_hosts": "~/.ssh/known_hosts",
                            "client_keys": ["~/.ssh/id_ed25519"], "client_certs": [], "agent": False}
MAX_HOPS = 8
CONFIG_MAX_BYTES = 1024 * 1024
ADDRESS = re.compile(r"[A-Za-z0-9.:-]{1,253}")
USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


@dataclass
class _Traced:
    """What the operator's config says for one host name, and the line each value came from."""

    options: dict[str, Any]
    origins: dict[str, str]
    ignored: list[str] = field(default_factory=list)


class _TracingConfig(SSHClientConfig):
    """asyncssh's OpenSSH config parser, remembering the line (and Host block) of each value it takes.

    ``Match exec`` is refused while parsing: asyncssh would run its command, as root here.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.origins: dict[str, str] = {}
        self.block = ""

    def _where(self) -> str:
        return f"{self._path} line {self._line_no}" + (f" ({self.block})" if self.block else "")

    def _trace_host(self, option: str, args: list[str]) -> None:
        self.block = "Host " + " ".join(args)
        self._match_host(option, args)

    def _trace_match(self, option: str, args: list[str]) -> None:
        if any(arg.lower().lstrip("!") == "exec" for arg in args):
            self._error("Match exec would run a command as root: proofbot refuses it")
        self.block = "Match " + " ".join(args)
        self._match(option, args)


def _tracing(option: str, handler: Callable[..., None]) -> Callable[..., None]:
    def traced(config: _TracingConfig, name: str, args: list[str]) -> None:
        before = config._options.get(option)
        before_len = len(before) if isinstance(before, list) else -1
        handler(config, name, args)
        after = config._options.get(option)
        if after is not before or (isinstance(after, list) and len(after) != before_len):
            where = config._where()
            config.origins[option] = (config.origins[option] + ", " + where
                                      if isinstance(after, list) and option in config.origins else where)
    return traced


_TracingConfig._handlers = {
    key: (option, _TracingConfig._trace_host if key == "host" else
          _TracingConfig._trace_match if key == "match" else _tracing(option, handler))
    for key, (option, handler) in SSHClientConfig._handlers.items()
}


def _check_config_file(path: Path, where: str) -> None:
    """OpenSSH's own rule: owned by root or this user, writable by no one else, not huge."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InventoryError(f"{where}: ssh config {path} does not exist") from None
    except OSError as exc:
        raise InventoryError(f"{where}: cannot read ssh config {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InventoryError(f"{where}: ssh config {path} is not a regular file")
    if info.st_uid not in (0, os.getuid()) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InventoryError(
            f"{where}: bad owner or permissions on ssh config {path} "
            f"(uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o})",
            hint="it decides which host keys are trusted: make it owned by root or this user, "
                 "writable by no one else (chmod go-w)")
    if info.st_size > CONFIG_MAX_BYTES:
        raise InventoryError(f"{where}: ssh config {path} is larger than {CONFIG_MAX_BYTES // 1024} KiB")


def read_config(path: Path, alias: str, where: str) -> _Traced:
    """The options the operator's config gives ``alias`` (as ``ssh alias`` would read them)."""
    _check_config_file(path, where)
    try:
        local_user = getpass.getuser()
    except KeyError:
        local_user = "root"
    try:
        config = _TracingConfig.load(None, [path], False, False, False, local_user, (), alias, ())
    except (OSError, ValueError) as exc:
        raise InventoryError(f"{where}: ssh config: {exc}") from None
    assert isinstance(config, _TracingConfig)
    options = {option: config.get(option) for option in (*TAKEN, "ProxyCommand") if config.get(option) is not None}
    ignored = sorted(f"{option} ({where_})" for option, where_ in config.origins.items()
                     if option not in TAKEN and option != "ProxyCommand")
    return _Traced(options, dict(config.origins), ignored)


def _written(entry: Mapping[str, Any], top: Mapping[str, Any], own: Mapping[str, Any], name: str,
             key: str) -> tuple[Any, str] | None:
    """The inventory's own value for key, and where it is written; None when it is not written."""
    if key in ("address", "port"):
        return (entry[key], f"inventory hosts.{name}.{key}") if key in entry else None
    if key in own:
        return own[key], f"inventory hosts.{name}.ssh.{key}"
    if key in top:
        return top[key], f"inventory ssh.{key}"
    return None


def resolve_entry(name: str, entry: Mapping[str, Any], top: Mapping[str, Any], own: Mapping[str, Any],
                  source: str, jump_written: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The host entry with every SSH value decided and ``origins`` filled in, and the config's ProxyJump
    as hops (see ``_hops``; none when the config has no ProxyJump or the inventory writes a jump: its
    key is ``jump_written``, the jump itself being resolved by the inventory loader)."""
    where = f"{source}: hosts.{name}"
    ssh = {**top, **own}
    config_path = ssh.get("config")
    traced = _Traced({}, {})
    if config_path is not None:
        if not isinstance(config_path, str) or not config_path or "\x00" in config_path or "\n" in config_path:
            raise InventoryError(f"{where}.ssh.config: must be the path of an OpenSSH client config")
        traced = read_config(Path(os.path.expanduser(config_path)), name, where)
        if "ProxyCommand" in traced.options and str(traced.options["ProxyCommand"]).lower() != "none":
            raise InventoryError(
                f"{where}: ssh config {traced.origins['ProxyCommand']} sets ProxyCommand: proofbot runs as root "
                "and runs no command an ssh config names",
                hint="use ProxyJump (or ssh.jump in the inventory) for a bastion")
    from_config = {TAKEN[option]: value for option, value in traced.options.items() if option in TAKEN}
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key in ("address", "port", "user", "client_keys", "client_certs", "known_hosts", "jump", "agent"):
        written = (None, f"inventory {jump_written}") if key == "jump" and jump_written else \
            _written(entry, top, own, name, key)
        option = next((option for option, value in TAKEN.items() if value == key), "")
        if written is not None:
            values[key], origins[key] = written
        elif key in from_config:
            values[key], origins[key] = from_config[key], traced.origins.get(option, str(config_path))
        elif key == "address" and config_path is not None:
            values[key], origins[key] = name, "the host's name (no HostName in the ssh config)"
        elif key in DEFAULTS:
            values[key], origins[key] = DEFAULTS[key], "default"
    if config_path is not None:
        origins["config"] = _written(entry, top, own, name, "config")[1]  # type: ignore[index]
        if traced.ignored:
            origins["ignored"] = "; ".join(traced.ignored)
    _check_config_values(where, values, origins, from_config)
    resolved = {**entry, "name": name, "origins": origins}
    if "address" in values:
        resolved["address"] = values["address"]
    if "port" in values:
        resolved["port"] = values["port"]
    resolved["ssh"] = {**ssh, **{key: values[key] for key in ("user", "client_keys", "client_certs", "known_hosts")}}
    jump = values.get("jump")
    # Only the config's ProxyJump becomes hops here; a jump the inventory writes is the inventory's own.
    if isinstance(jump, str) and jump.lower() != "none" and not origins.get("jump", "").startswith("inventory"):
        hops = _hops(jump, origins["jump"], config_path, where)
        origins["jump"] += f": {jump}"  # `ping -v`: the line, and the hops as written there
        return resolved, hops
    return resolved, []


def _check_config_values(where: str, values: dict[str, Any], origins: dict[str, str],
                         from_config: dict[str, Any]) -> None:
    """What came from the config must be as valid as the inventory's own keys; the error names the line."""
    if "address" in from_config and not origins["address"].startswith("inventory"):
        if not ADDRESS.fullmatch(str(values["address"])):
            raise InventoryError(f"{where}: HostName {values['address']!r} ({origins['address']}) "
                                 "is not a host name or IP address")
    if "user" in from_config and not USER.fullmatch(str(values["user"])):
        raise InventoryError(f"{where}: User {values['user']!r} ({origins['user']}) is not a valid user name")
    known = values.get("known_hosts")
    files = [known] if isinstance(known, str) else list(known or [])
    if any(os.path.realpath(os.path.expanduser(str(path))) == "/dev/null" for path in files):
        raise InventoryError(
            f"{where}: known_hosts /dev/null ({origins['known_hosts']}) would trust no host key and "
            "proofbot always checks host keys: it will not connect so",
            hint="set ssh.known_hosts in the inventory to a file with this host's key or its CA")


def _hops(jump: str, origin: str, config_path: object, where: str) -> list[dict[str, Any]]:
    """ProxyJump ``[user@]host[:port],…`` as hops, each hop name resolved through the same config.

    Each hop is ``{"name": as written, "alias", "address", "port", "ssh"}``, ``ssh`` being what the
    hop changes of the host's own SSH settings: its user (HostName, Port and User from its block),
    and, when its block has them, its own IdentityFile (with only the certificates beside those
    files) and UserKnownHostsFile; otherwise it logs in and checks keys with the host's."""
    hops: list[dict[str, Any]] = []
    for hop in jump.split(",")[:MAX_HOPS + 1]:
        user, _, rest = hop.rpartition("@")
        match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::([0-9]{1,5}))?|([^:\s]+)(?::([0-9]{1,5}))?", rest)
        if not match:
            raise InventoryError(f"{where}: ProxyJump {hop!r} ({origin}) is not [user@]host[:port]")
        alias = match.group(1) or match.group(3)
        port_text = match.group(2) or match.group(4)
        hop_config = read_config(Path(os.path.expanduser(str(config_path))), alias, where).options
        known_hosts = [str(path) for path in hop_config.get("UserKnownHostsFile", [])]
        if any(os.path.realpath(os.path.expanduser(path)) == "/dev/null" for path in known_hosts):
            raise InventoryError(f"{where}: ProxyJump hop {hop!r} ({origin}): its UserKnownHostsFile /dev/null "
                                 "would trust no host key and proofbot always checks host keys")
        address = str(hop_config.get("Hostname", alias))
        hop_user = user or str(hop_config.get("User", DEFAULTS["user"]))
        port = int(port_text) if port_text else int(hop_config.get("Port", 22))
        if not ADDRESS.fullmatch(address) or not USER.fullmatch(hop_user) or not 1 <= port <= 65535:
            raise InventoryError(f"{where}: ProxyJump hop {hop!r} ({origin}) resolves to {hop_user}@{address}:{port}, "
                                 "not a valid user, host and port")
        if any((address, port) == (seen["address"], seen["port"]) for seen in hops):
            raise InventoryError(f"{where}: ProxyJump ({origin}) reaches {address}:{port} twice")
        ssh: dict[str, Any] = {"user": hop_user}
        if hop_config.get("IdentityFile"):
            ssh |= {"client_keys": [str(path) for path in hop_config["IdentityFile"]], "client_certs": []}
        if known_hosts:
            ssh["known_hosts"] = known_hosts
        hops.append({"name": hop, "alias": alias, "address": address, "port": port, "ssh": ssh})
    if len(hops) > MAX_HOPS:
        raise InventoryError(f"{where}: ProxyJump ({origin}) has more than {MAX_HOPS} hops")
    return hops
