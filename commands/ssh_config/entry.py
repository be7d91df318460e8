"""An inventory host entry with its SSH values decided through the operator's ssh config (``ssh.config``).

The inventory's own values are ssh's command line (``ssh.user`` = ``-l``, ``port`` = ``-p``,
``client_keys`` = ``-i``, ``known_hosts`` = ``-o UserKnownHostsFile=``, ``address`` =
``-o HostName=``, ``jump`` = ``-J``): they win, and the config decides the rest exactly as ``ssh -G``
(commands/ssh_config/resolve.py). Each value keeps its origin (``Host.origins``). Whatever would
make proofbot connect, log in or trust differently from ssh and that proofbot does not implement is
refused here, at load, with its file and line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from commands.errors import InventoryError
from commands.ssh_config.defaults import ADDRESS, MAX_HOPS, USER_NAME
from commands.ssh_config.files import UnsafeFile, UnsafeFiles, check_config_file, unsafe_files

if TYPE_CHECKING:
    from commands.ssh_config.evaluate import Jump
    from commands.ssh_config.resolve import CommandLine, Resolution

# The config's reader (lexer, evaluate, resolve, tokens, keywords: ~9 ms of imports) loads only for an inventory
# that names an ssh config (ssh.config); without one the inventory's values and proofbot's defaults decide.

SSH_KEYS = ("user", "client_keys", "client_certs", "known_hosts", "global_known_hosts", "host_key_alias")


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


def _listed(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(str(item) for item in value or ())


def _checked(where: str, resolution: Resolution, agent: bool) -> None:
    """Refuse what ssh would do and proofbot does not (each with its line), and values proofbot cannot use."""
    from commands.ssh_config.keywords import REFUSED_WHEN

    for keyword, line in resolution.other.items():
        refused = REFUSED_WHEN.get(keyword)
        value = " ".join(line.args)
        if refused is not None and refused[0](value):
            raise InventoryError(f"{where}: ssh config {line.where}: {line.written} {value}: {refused[1]}")
        if agent and keyword == "identityagent" and value != "SSH_AUTH_SOCK":
            raise InventoryError(f"{where}: ssh config {line.where}: IdentityAgent {value}: with ssh.agent proofbot "
                                 "uses SSH_AUTH_SOCK only")
        if agent and keyword == "identitiesonly" and value.lower() in ("yes", "true"):
            raise InventoryError(f"{where}: ssh config {line.where}: IdentitiesOnly {value}: with ssh.agent proofbot "
                                 "offers every agent key; set ssh.agent: false or drop the line")
    origin = resolution.origins
    if not ADDRESS.fullmatch(resolution.hostname):
        raise InventoryError(f"{where}: HostName {resolution.hostname!r} ({origin.get('hostname', 'the name')}) "
                             "is not a host name or IP address")
    if not USER_NAME.fullmatch(resolution.user):
        raise InventoryError(f"{where}: User {resolution.user!r} ({origin.get('user', 'this user')}) "
                             "is not a valid user name")
    if not resolution.user_known_hosts:
        raise InventoryError(f"{where}: UserKnownHostsFile none ({origin.get('user_hostfiles')}): proofbot needs "
                             "a known_hosts file of its own for the host")
    if any(os.path.realpath(path) == "/dev/null" for path in resolution.user_known_hosts):
        raise InventoryError(
            f"{where}: known_hosts /dev/null ({origin.get('user_hostfiles', 'inventory')}) would trust no host key "
            "and proofbot always checks host keys: it will not connect so",
            hint="set ssh.known_hosts in the inventory to a file with this host's key or its CA")


def _refuse_unsafe(name: str, ssh: Mapping[str, Any], origins: Mapping[str, str], context: str = "") -> None:
    unsafe = unsafe_files(name, ssh, origins, context)
    if unsafe:
        raise UnsafeFiles(unsafe)


def resolve_config(config: str, name: str, command_line: CommandLine, where: str,
                   given: Mapping[str, str] | None = None) -> Resolution:
    """``resolve`` with its errors as InventoryError naming the host."""
    from commands.ssh_config.evaluate import ConfigError
    from commands.ssh_config.resolve import resolve
    from commands.ssh_config.tokens import ExpandError

    try:
        return resolve(config, name, command_line, origins=dict(given or {}))
    except (ConfigError, ExpandError, UnsafeFile) as exc:
        raise InventoryError(f"{where}: ssh config: {exc}") from None


def _settings(resolution: Resolution) -> dict[str, Any]:
    return {"user": resolution.user, "client_keys": resolution.identity_files,
            "client_certs": resolution.certificate_files, "known_hosts": resolution.user_known_hosts,
            "global_known_hosts": resolution.global_known_hosts, "host_key_alias": resolution.host_key_alias}


def resolve_entry(name: str, entry: Mapping[str, Any], top: Mapping[str, Any], own: Mapping[str, Any],
                  source: str, jump_written: str | None = None,
                  hop_cache: dict[tuple[Any, ...], Resolution] | None = None
                  ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The host entry with every SSH value decided and ``origins`` filled in, and the config's ProxyJump
    as hops (each ``{"name", "alias", "address", "port", "ssh"}``, resolved through the same config as
    ssh resolves a jump host); none when the config has none or the inventory writes a jump. ``hop_cache``
    (one per inventory load) resolves a bastion shared by many hosts once."""
    where = f"{source}: hosts.{name}"
    ssh = {**top, **own}
    config_path = ssh.get("config")
    if config_path is None:
        return _without_config(name, entry, top, own, ssh, jump_written)
    if not isinstance(config_path, str) or not config_path or "\x00" in config_path or "\n" in config_path:
        raise InventoryError(f"{where}.ssh.config: must be the path of an OpenSSH client config")
    config = os.path.expanduser(config_path)
    config_origin = _written(entry, top, own, name, "config")[1]  # type: ignore[index]
    if not os.path.isfile(config):
        raise InventoryError(f"{where}: ssh config {config} does not exist" if not os.path.exists(config)
                             else f"{where}: ssh config {config} is not a regular file")
    # ssh -F does not check the named file; proofbot does (as ssh checks ~/.ssh/config): stricter, and says so.
    try:
        check_config_file(config, f"{where} ({config_origin})")
    except UnsafeFile as exc:
        raise InventoryError(str(exc)) from None
    from commands.ssh_config.resolve import CommandLine

    written = {key: _written(entry, top, own, name, key) for key in ("address", "port", "user", "client_keys",
                                                                    "known_hosts")}
    values = {key: value[0] for key, value in written.items() if value is not None}
    command_line = CommandLine(
        user=values.get("user"), port=values.get("port"),
        hostname=values.get("address"), identity_files=_listed(values.get("client_keys")),
        known_hosts=_listed(values["known_hosts"]) if "known_hosts" in values else None,
        jump=jump_written is not None)
    given = {key: value[1] for key, value in written.items() if value is not None}
    resolution = resolve_config(config, name, command_line, where, given)
    _checked(where, resolution, bool(ssh.get("agent")))
    origins = _origins(resolution, given, config_origin, jump_written)
    _refuse_unsafe(name, _settings(resolution), origins)
    resolved = {**entry, "name": name, "origins": origins, "address": resolution.hostname, "port": resolution.port,
                "ssh": {**ssh, **_settings(resolution)}}
    if resolution.jump is None or jump_written is not None:
        return resolved, []
    hops = _hops(resolution.jump, origins, config, where, {} if hop_cache is None else hop_cache, name)
    origins["jump"] += f": {resolution.jump.written}"  # `ping -v`: the line, and the hops as written there
    return resolved, hops


def _origins(resolution: Resolution, given: Mapping[str, str], config_origin: str,
             jump_written: str | None) -> dict[str, str]:
    lines = resolution.origins
    origins = {
        "address": given.get("address") or lines.get("hostname") or "the host's name (no HostName in the ssh config)",
        "port": given.get("port") or lines.get("port") or "default",
        "user": given.get("user") or lines.get("user") or "default (this user, as ssh)",
        "client_keys": ", ".join(filter(None, [given.get("client_keys"), lines.get("identity_files")])) or "default",
        "client_certs": lines.get("certificate_files") or "default",
        "known_hosts": given.get("known_hosts") or lines.get("user_hostfiles") or "default",
        "global_known_hosts": lines.get("system_hostfiles") or "default",
        "agent": "default", "config": config_origin,
    }
    if resolution.host_key_alias is not None:
        origins["host_key_alias"] = lines.get("host_key_alias", "")
    if resolution.canonicalized:
        origins["address"] += f", canonicalized ({lines.get('canonicalize_hostname', 'a numeric address')})"
    if jump_written is not None:
        origins["jump"] = f"inventory {jump_written}"
    elif resolution.jump is not None:
        origins["jump"] = lines.get("jump", "")
    ignored = [f"{line.written} ({line.where})" for keyword, line in sorted(resolution.other.items())]
    if ignored:
        origins["ignored"] = "; ".join(ignored)
    return origins


def _without_config(name: str, entry: Mapping[str, Any], top: Mapping[str, Any], own: Mapping[str, Any],
                    ssh: Mapping[str, Any], jump_written: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """No ssh config: the inventory's values, else proofbot's defaults (as before ssh.config existed)."""
    origins = {}
    for key in ("address", "port", "user", "client_keys", "client_certs", "known_hosts", "global_known_hosts",
                "host_key_alias", "agent"):
        written = _written(entry, top, own, name, key)
        if written is not None:
            origins[key] = written[1]
        elif key != "address":
            origins[key] = "default"
    if jump_written is not None:
        origins["jump"] = f"inventory {jump_written}"
    if isinstance(ssh, Mapping):
        _refuse_unsafe(name, ssh, origins)
    return {**entry, "name": name, "origins": origins, "ssh": dict(ssh)}, []


def _hops(jump: Jump, origins: Mapping[str, str], config: str, where: str,
          cache: dict[tuple[Any, ...], Resolution], name: str) -> list[dict[str, Any]]:
    """ProxyJump ``a,b,c`` as ssh runs it: c reached by ``ssh [-l] [-p] -J a,b c``, b by ``ssh -J a b``, a by
    ``ssh a``: each hop resolved through the same config with only its own user and port given (the
    host's inventory keys and known_hosts are not passed on, as ssh does not pass them)."""
    from commands.ssh_config.resolve import CommandLine

    origin = origins["jump"]
    written = [*(jump.extra.split(",") if jump.extra else []), ""]
    if len(written) > MAX_HOPS:
        raise InventoryError(f"{where}: ProxyJump ({origin}) has more than {MAX_HOPS} hops")
    hops: list[dict[str, Any]] = []
    for index, text in enumerate(written):
        if index == len(written) - 1:
            user, alias, port, shown = jump.user, jump.host, jump.port, jump.written.rsplit(",", 1)[-1].strip()
        else:
            from commands.ssh_config.taken import parse_user_host_port
            parsed = parse_user_host_port(text.strip())
            if parsed is None:
                raise InventoryError(f"{where}: ProxyJump {text!r} ({origin}) is not [user@]host[:port]")
            (user, alias, port), shown = parsed, text.strip()
        hop_where = f"{where}: ProxyJump hop {shown!r} ({origin})"
        command_line = CommandLine(user=user, port=port if port > 0 else None, jump=index > 0)
        key = (config, alias, command_line)
        if key not in cache:
            cache[key] = resolve_config(config, alias, command_line, hop_where)
        resolution = cache[key]
        if index == 0 and resolution.jump is not None:
            raise InventoryError(f"{hop_where}: the config gives the hop its own ProxyJump "
                                 f"({resolution.origins.get('jump')}): ssh would reach it through that (a loop when "
                                 f"it is the same bastion); proofbot does not follow it: exclude the bastion from that "
                                 f"block (`Host * !{alias}`)")
        _checked(hop_where, resolution, False)
        _refuse_unsafe(name, _settings(resolution), _origins(resolution, {}, origins["config"], None),
                       context=f"ProxyJump hop {shown!r} ({origin}): ")
        if any((resolution.hostname, resolution.port) == (seen["address"], seen["port"]) for seen in hops):
            raise InventoryError(f"{where}: ProxyJump ({origin}) reaches {resolution.hostname}:{resolution.port} twice")
        hops.append({"name": shown, "alias": alias, "address": resolution.hostname, "port": resolution.port,
                     "ssh": _settings(resolution)})
    return hops
