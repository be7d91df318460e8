"""``ssh -G`` for one host: the command line first, the config (twice with ``Match final`` or canonicalization),
the host name, defaults, then tokens: the order of ssh.c main().

``resolve`` takes the inventory's own values as ssh's command line takes them (``-l``, ``-p``, ``-i``,
``-o UserKnownHostsFile=``, ``-J``): set before the config is read, so they win and ``Match user``
sees the user they give; tokens (``%r``, ``%p`` …) are expanded last, with the effective values.
"""

from __future__ import annotations

import concurrent.futures
import socket
from dataclasses import dataclass, field

from commands.ssh_config.defaults import OPENSSH_IDENTITIES, OPENSSH_USER_HOSTFILES, SYSTEM_HOSTFILES
from commands.ssh_config.evaluate import ConfigError, Context, Jump, Options, read_config
from commands.ssh_config.lexer import Line
from commands.ssh_config.patterns import lower_ascii
from commands.ssh_config.tokens import ExpandError, LocalUser, client_tokens, expand, tilde

RESOLVE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class CommandLine:
    """The inventory's values as ssh's command-line options (None: not written)."""

    user: str | None = None
    port: int | None = None
    hostname: str | None = None  # the inventory's address, as -o HostName=
    identity_files: tuple[str, ...] = ()
    known_hosts: tuple[str, ...] | None = None
    jump: bool = False  # -J: the inventory writes the hops; the config's ProxyJump/ProxyCommand do not apply


@dataclass
class Resolution:
    """What ``ssh -G`` shows for the values proofbot takes, expanded as ssh uses them, with their lines."""

    host_arg: str
    hostname: str
    port: int
    user: str
    identity_files: list[str]  # expanded (tilde, tokens, ${VAR}); "none" dropped
    identity_files_raw: list[str]  # as ssh -G prints them
    certificate_files: list[str]
    certificate_files_raw: list[str]
    user_known_hosts: list[str]  # as ssh -G prints them (already expanded there)
    global_known_hosts: list[str]  # ~ expanded (ssh -G prints them unexpanded)
    global_known_hosts_raw: list[str]
    host_key_alias: str | None
    jump: Jump | None
    canonicalized: bool
    origins: dict[str, str] = field(default_factory=dict)
    other: dict[str, Line] = field(default_factory=dict)


def _getaddrinfo(name: str, port: int, flags: int) -> list[tuple[object, ...]] | None:
    """getaddrinfo with a deadline (a DNS server that never answers must not hold inventory load)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(socket.getaddrinfo, name, str(port), socket.AF_UNSPEC, socket.SOCK_STREAM, 0, flags)
        try:
            return list(future.result(timeout=RESOLVE_TIMEOUT_S))
        except (OSError, UnicodeError):
            return None
        except concurrent.futures.TimeoutError:
            raise ConfigError(f"resolving {name!r} for CanonicalizeHostname took over {RESOLVE_TIMEOUT_S:g} s") \
                from None


def _numeric(name: str) -> str | None:
    """ssh.c resolve_addr: the canonical form of a single numeric address, else None."""
    try:
        infos = socket.getaddrinfo(name, "22", socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                                   socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)
    except (OSError, UnicodeError):
        return None
    if len(infos) != 1:
        return None
    try:
        return socket.getnameinfo(infos[0][4], socket.NI_NUMERICHOST)[0]
    except OSError:
        return None


def _is_addr_fast(name: str) -> bool:
    return "%" in name or ":" in name or all(char in "0123456789." for char in name)


def _canonicalize(host: str, port: int, options: Options, mode: str) -> tuple[str, bool]:
    """ssh.c resolve_canonicalize: (host name, whether it was changed)."""
    numeric = _numeric(host)
    if numeric is not None:
        return (numeric, True) if numeric.lower() != host.lower() else (host, False)
    if _is_addr_fast(host) or mode == "no":
        return host, False
    direct = options.proxy_command in (None, "none") and options.jump is None
    if not direct and mode != "always":
        return host, False
    fallback = options.canonicalize_fallback_local is not False
    if host.endswith("."):
        if _getaddrinfo(host, port, socket.AI_CANONNAME) is not None:
            return host[:-1], True
    elif host.count(".") <= (1 if options.canonicalize_max_dots is None else options.canonicalize_max_dots):
        for domain in options.canonical_domains:
            if domain == "none":
                break
            if _getaddrinfo(f"{host}.{domain}.", port, socket.AI_CANONNAME) is not None:
                return f"{host}.{domain}", True
    else:
        return host, False
    if not fallback:
        raise ConfigError(f'{_origin(options, "canonicalize_fallback_local")}: CanonicalizeFallbackLocal no: '
                          f'Could not resolve host "{host}" (as ssh: it would not connect)')
    return host, False


def _origin(options: Options, key: str) -> str | None:
    lines = options.origins.get(key)
    return ", ".join(dict.fromkeys(lines)) if lines else None


def resolve(config: str, name: str, command_line: CommandLine, local: LocalUser | None = None,
            origins: dict[str, str] | None = None) -> Resolution:
    """What ``ssh -G [-l U] [-p P] [-i K] [-o UserKnownHostsFile=…] -F config name`` resolves (raises ConfigError)."""
    local = local or LocalUser.current()
    options = Options()
    given = dict(origins or {})
    if command_line.user is not None:
        options.user = command_line.user
    if command_line.port is not None:
        options.port = command_line.port
    if command_line.hostname is not None:
        options.hostname = command_line.hostname
    for path in command_line.identity_files:
        if (tilde(path, local), True) not in options.identity_files:
            options.identity_files.append((tilde(path, local), True))
    if command_line.known_hosts is not None:
        options.user_hostfiles = list(command_line.known_hosts)
    if command_line.jump:
        options.jump = Jump("(inventory)", None, -1, None, "(inventory)")
        options.proxy_command = "none"
    context = Context(host=name, original_host=name, final_pass=False, local=local)
    read_config(config, options, context)
    mode = options.canonicalize_hostname or "no"
    host = name
    if options.hostname is not None:
        try:
            host = expand(options.hostname, {"h": name})
        except ExpandError as exc:
            raise ConfigError(f"{_origin(options, 'hostname')}: HostName: {exc}") from None
        options.hostname = host
    was_addr = _is_addr_fast(host) or _numeric(host) is not None
    if not was_addr:
        host = lower_ascii(host)
    canonicalized = False
    if mode != "no" or was_addr:
        host, canonicalized = _canonicalize(host, options.port if options.port > 0 else 22, options, mode)
    if options.permitted_cnames and options.permitted_cnames != ["none"]:
        raise ConfigError(f"{_origin(options, 'permitted_cnames')}: CanonicalizePermittedCNAMEs follows DNS "
                          "aliases: proofbot does not implement it")
    if mode != "no" or context.want_final_pass:
        options.hostname = host
        final = Context(host=host, original_host=name, final_pass=True, local=local)
        read_config(config, options, final)
    return _finish(options, name, host, canonicalized, local, given)


def _finish(options: Options, name: str, host: str, canonicalized: bool, local: LocalUser,
            given: dict[str, str]) -> Resolution:
    """fill_default_options, the jump-loop check and token expansion, as ssh.c does them after the config."""
    user = options.user if options.user is not None else local.name
    port = options.port if options.port > 0 else 22
    jump = options.jump
    if jump is not None and jump.host == "none" and jump.port == 0 and jump.user is None:
        jump = None
    if jump is not None and jump.host != "(inventory)":
        if jump.host == host and (jump.port if jump.port > 0 else 22) == port and (jump.user or user) == user:
            raise ConfigError(f"{_origin(options, 'jump')}: ProxyJump {jump.written}: jumphost loop via "
                              f"{jump.host} (ssh refuses it)")
    proxy = None if options.proxy_command is None or options.proxy_command.lower() == "none" \
        else options.proxy_command
    if proxy is not None:
        raise ConfigError(f"{_origin(options, 'proxy_command')}: sets ProxyCommand: proofbot runs as root "
                          "and runs no command an ssh config names (use ProxyJump, or ssh.jump in the inventory)")
    alias = lower_ascii(options.host_key_alias) if options.host_key_alias is not None else None
    tokens = client_tokens(host=host, host_arg=name, port=port, user=user, key_alias=alias, local=local)
    identities_raw = [path for path, _ in options.identity_files] or list(OPENSSH_IDENTITIES)
    user_files = list(options.user_hostfiles) or list(OPENSSH_USER_HOSTFILES)
    system_raw = list(options.system_hostfiles) or list(SYSTEM_HOSTFILES)
    for kind, files in (("UserKnownHostsFile", user_files), ("GlobalKnownHostsFile", system_raw)):
        if files and files[0].lower() == "none":
            if len(files) > 1:
                raise ConfigError(f'Invalid {kind}s: "none" appears with other entries')
            files.clear()

    def expanded(path: str, what: str) -> str:
        try:
            return expand(tilde(path, local), tokens, dollar=True)
        except ExpandError as exc:
            where = _origin(options, what) or given.get(what) or "the inventory"
            raise ConfigError(f"{where}: {path!r}: {exc}") from None

    resolution = Resolution(
        host_arg=name, hostname=host, port=port, user=user,
        identity_files=[expanded(path, "identity_files") for path in identities_raw if path.lower() != "none"],
        identity_files_raw=identities_raw,
        certificate_files=[expanded(path, "certificate_files") for path in options.certificate_files],
        certificate_files_raw=list(options.certificate_files),
        user_known_hosts=[expanded(path, "user_hostfiles") for path in user_files],
        global_known_hosts=[tilde(path, local) for path in system_raw], global_known_hosts_raw=system_raw,
        host_key_alias=alias, jump=None if jump is None or jump.host == "(inventory)" else jump,
        canonicalized=canonicalized, other=dict(options.other))
    for key in ("hostname", "port", "user", "identity_files", "certificate_files", "user_hostfiles",
                "system_hostfiles", "host_key_alias", "jump", "canonicalize_hostname"):
        origin = _origin(options, key)
        if origin is not None:
            resolution.origins[key] = origin
    return resolution
