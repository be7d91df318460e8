"""The options proofbot takes from an ssh config, each set as readconf.c sets it.

First value wins; lists are kept as ssh keeps them (IdentityFile appends, UserKnownHostsFile is set once).
"""

from __future__ import annotations

import re

from commands.ssh_config.evaluate import (
    MAX_FILES,
    MAX_HOSTS_FILES,
    ConfigError,
    Context,
    Jump,
    Options,
    _single,
    a2port,
)
from commands.ssh_config.lexer import WHITESPACE, Line

_FLAG = {"yes": True, "true": True, "no": False, "false": False}
_CANONICALIZE = {"yes": "yes", "true": "yes", "no": "no", "false": "no", "always": "always"}
_DOMAIN = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*", re.IGNORECASE)


def parse_user_host_port(text: str) -> tuple[str | None, str, int] | None:
    """misc.c parse_user_host_port: ``[user@]host[:port]``, ``[v6]:port``; None when ssh rejects it."""
    user: str | None = None
    if "@" in text:
        user, _, text = text.rpartition("@")
        if user == "":
            return None
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return None
        host, rest = text[:close + 1], text[close + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
    else:
        cut = min((index for index in (text.find(":"), text.find("/")) if index >= 0), default=-1)
        if cut >= 0 and text[cut] == "/":
            return None
        host, port_text = (text, "") if cut < 0 else (text[:cut], text[cut + 1:])
    if host == "":
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = -1
    if port_text:
        port = a2port(port_text)
        if port <= 0:
            return None
    return user, host, port


def _jump(line: Line, options: Options, active: bool) -> None:
    """readconf.c parse_jump: every hop's syntax checked; set only if active and neither ProxyJump nor
    ProxyCommand was obtained before (so ``ProxyCommand none`` earlier means a direct connection)."""
    raw = line.rest.lstrip(WHITESPACE + "=")
    active = active and options.proxy_command is None and options.jump is None
    text = raw.split("#", 1)[0].rstrip(WHITESPACE)
    if raw.lower() == "none":
        if active:
            options.jump = Jump("none", None, 0, None, raw)
        return
    parsed = []
    for hop in reversed(text.split(",")):
        if hop.startswith("ssh://"):
            raise ConfigError(f"{line.where}: ProxyJump {hop!r}: proofbot does not take ssh:// URIs here; "
                              "write [user@]host[:port]")
        result = parse_user_host_port(hop)
        if result is None:
            raise ConfigError(f'{line.where}: Invalid ProxyJump "{raw}"')
        parsed.append(result)
    if active:
        user, host, port = parsed[0]
        comma = raw.rfind(",")
        options.jump = Jump(host, user, port, raw[:comma] if comma > 0 else None, raw)
        options.proxy_command = "none"


def _files(line: Line, target: list[str], limit: int) -> list[str] | None:
    """readconf.c parse_char_array: the list, or None when ssh would keep the one it has."""
    values: list[str] = []
    for index, arg in enumerate(line.args):
        if arg == "":
            raise ConfigError(f"{line.where}: keyword {line.keyword} empty argument")
        if arg.lower() == "none" and (index > 0 or len(line.args) > 1):
            raise ConfigError(f'{line.where}: keyword {line.keyword} "none" argument must appear alone.')
        values.append(arg)
    if len(values) > limit:
        raise ConfigError(f"{line.where}: too many {line.keyword} entries.")
    return values if not target else None


def take(line: Line, options: Options, context: Context, active: bool) -> None:
    keyword, block = line.keyword, context.block

    def set_once(attribute: str, value: object) -> None:
        if active and getattr(options, attribute) in (None, -1):
            setattr(options, attribute, value)
            options.came_from(attribute, line, block)

    if keyword in ("hostname", "user", "hostkeyalias", "ignoreunknown"):
        attribute = {"hostname": "hostname", "user": "user", "hostkeyalias": "host_key_alias",
                     "ignoreunknown": "ignored_unknown"}[keyword]
        set_once(attribute, _single(line))
    elif keyword == "port":
        port = a2port(_single(line))
        if port <= 0:
            raise ConfigError(f"{line.where}: Bad port '{line.args[0]}'.")
        set_once("port", port)
    elif keyword in ("identityfile", "identityfile2"):
        path = _single(line)
        if active:
            if len(options.identity_files) >= MAX_FILES:
                raise ConfigError(f"{line.where}: Too many identity files specified (max {MAX_FILES}).")
            if (path, True) not in options.identity_files:
                options.identity_files.append((path, True))
                options.came_from("identity_files", line, block)
    elif keyword == "certificatefile":
        path = _single(line)
        if active and path not in options.certificate_files:
            if len(options.certificate_files) >= MAX_FILES:
                raise ConfigError(f"{line.where}: Too many certificate files specified (max {MAX_FILES}).")
            options.certificate_files.append(path)
            options.came_from("certificate_files", line, block)
    elif keyword in ("userknownhostsfile", "globalknownhostsfile"):
        attribute = "user_hostfiles" if keyword == "userknownhostsfile" else "system_hostfiles"
        values = _files(line, getattr(options, attribute), MAX_HOSTS_FILES)
        if active and values is not None:
            setattr(options, attribute, values)
            options.came_from(attribute, line, block)
    elif keyword == "proxycommand":
        command = line.rest.lstrip(WHITESPACE + "=")
        if options.jump is None:  # ProxyCommand is ignored once ProxyJump was obtained
            set_once("proxy_command", command)
    elif keyword == "proxyjump":
        before = options.jump
        _jump(line, options, active)
        if options.jump is not before:
            options.came_from("jump", line, block)
    elif keyword == "canonicalizehostname":
        mode = _CANONICALIZE.get(_single(line).lower())
        if mode is None:
            raise ConfigError(f'{line.where}: unsupported option "{line.args[0]}".')
        set_once("canonicalize_hostname", mode)
    elif keyword == "canonicalizefallbacklocal":
        flag = _FLAG.get(_single(line).lower())
        if flag is None:
            raise ConfigError(f'{line.where}: unsupported option "{line.args[0]}".')
        set_once("canonicalize_fallback_local", flag)
    elif keyword == "canonicalizemaxdots":
        text = _single(line)
        if not re.fullmatch(r"-?\d+", text):
            raise ConfigError(f"{line.where}: integer value invalid.")
        set_once("canonicalize_max_dots", int(text))
    elif keyword == "canonicaldomains":
        values = _files(line, options.canonical_domains, 32)
        for domain in line.args:
            if domain.lower() != "none" and not _DOMAIN.fullmatch(domain):
                raise ConfigError(f"{line.where}: {domain!r} is not a valid domain")
        if active and values is not None:
            options.canonical_domains = [domain.lower() for domain in values]
            options.came_from("canonical_domains", line, block)
    elif keyword == "canonicalizepermittedcnames":
        if active and not options.permitted_cnames:
            options.permitted_cnames = list(line.args)
            options.came_from("permitted_cnames", line, block)
