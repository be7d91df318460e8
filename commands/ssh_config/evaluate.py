"""One pass over an OpenSSH client config for one host, as readconf.c reads it: Host, Match, Include, first value wins.

``Options`` holds what ssh's ``Options`` struct holds for the options proofbot takes (each with the
line it came from); ``read_config`` walks the file as ``read_config_file_depth`` does: the ``active``
flag shared with Included files (and restored after each), ``Match`` judged on the values obtained so
far (so the inventory's ``-l`` user counts), Include globs sorted with dot-files skipped, at most 16
levels deep. ``Match exec`` is refused wherever it is written: ssh runs it even in a block that does
not apply to the host.
"""

from __future__ import annotations

import glob
import os
import re
import socket
from dataclasses import dataclass, field

from commands.ssh_config.files import check_config_file
from commands.ssh_config.keywords import KNOWN, NO_OP, TAKEN, bad_value
from commands.ssh_config.lexer import Line, LineError, read_lines, strdelim_all
from commands.ssh_config.patterns import match_hostname, match_pattern, match_pattern_list
from commands.ssh_config.tokens import ExpandError, LocalUser, expand

MAX_DEPTH = 16  # readconf.c READCONF_MAX_DEPTH
MAX_FILES = 100  # SSH_MAX_IDENTITY_FILES, SSH_MAX_CERTIFICATE_FILES
MAX_HOSTS_FILES = 32  # SSH_MAX_HOSTS_FILES


class ConfigError(ValueError):
    """ssh would not run with this config (or proofbot refuses it); the message names file and line."""


@dataclass
class Jump:
    """ProxyJump as readconf.c parse_jump keeps it: the last hop, and the hops before it as written."""

    host: str
    user: str | None
    port: int
    extra: str | None
    written: str


@dataclass
class Options:
    """The values obtained so far, each set once (first wins), and the line that set it."""

    hostname: str | None = None
    host_key_alias: str | None = None
    user: str | None = None
    port: int = -1
    identity_files: list[tuple[str, bool]] = field(default_factory=list)  # (path, user-provided)
    certificate_files: list[str] = field(default_factory=list)
    user_hostfiles: list[str] = field(default_factory=list)
    system_hostfiles: list[str] = field(default_factory=list)
    proxy_command: str | None = None
    jump: Jump | None = None
    canonicalize_hostname: str | None = None
    canonical_domains: list[str] = field(default_factory=list)
    canonicalize_max_dots: int | None = None
    canonicalize_fallback_local: bool | None = None
    permitted_cnames: list[str] = field(default_factory=list)
    ignored_unknown: str | None = None
    origins: dict[str, list[str]] = field(default_factory=dict)
    # Options proofbot does not take: the first line that applies (what ssh would use), for refusal and display.
    other: dict[str, Line] = field(default_factory=dict)

    def came_from(self, key: str, line: Line, block: str) -> None:
        self.origins.setdefault(key, []).append(line.where + (f" ({block})" if block else ""))


@dataclass
class Context:
    """What one pass reads against: the host as typed and as resolved so far, the pass, this user."""

    host: str  # the name Host lines match (as typed in pass 1; the final name in pass 2)
    original_host: str
    final_pass: bool
    local: LocalUser
    want_final_pass: bool = False
    block: str = ""


def a2port(text: str) -> int:
    """misc.c a2port: 0-65535, or a service name from /etc/services; -1 when neither."""
    if re.fullmatch(r"\s*[+-]?\d+", text):
        value = int(text)
        return value if 0 <= value <= 65535 else -1
    try:
        return socket.getservbyname(text, "tcp")
    except OSError:
        return -1


def _single(line: Line) -> str:
    if not line.args or line.args[0] == "":
        raise ConfigError(f"{line.where}: missing argument")
    if len(line.args) > 1:
        raise ConfigError(f"{line.where}: keyword {line.keyword} extra arguments at end of line")
    return line.args[0]


def _host_line(line: Line, context: Context, nevermatch: bool) -> bool:
    active = False
    for arg in line.args:
        if arg == "":
            raise ConfigError(f"{line.where}: keyword host empty argument")
        if nevermatch:
            return False
        negated = arg.startswith("!")
        if match_pattern(context.host, arg[1:] if negated else arg):
            if negated:
                return False
            active = True
    return active


def _match_line(line: Line, options: Options, context: Context) -> bool:
    """readconf.c match_cfg_line (every criterion judged; exec refused before anything runs)."""
    try:
        args = list(strdelim_all(line.rest))
    except LineError as exc:
        raise ConfigError(f"{line.where}: {exc}") from None
    if any(arg.lstrip("!").lower() == "exec" for arg in args):
        raise ConfigError(f"{line.where}: Match exec would run a command as root: proofbot refuses it")
    ruser = options.user if options.user is not None else context.local.name
    if context.final_pass:
        host = options.hostname or context.host
    elif options.hostname is not None:
        try:
            host = expand(options.hostname, {"h": context.host})
        except ExpandError as exc:
            raise ConfigError(f"{line.where}: HostName: {exc}") from None
    else:
        host = context.host
    result, attributes, index = True, 0, 0
    while index < len(args):
        attrib = args[index]
        index += 1
        if attrib.startswith("#"):
            break
        negate = attrib.startswith("!")
        name = (attrib[1:] if negate else attrib).lower()
        if name == "all":
            following = args[index] if index < len(args) else None
            if attributes > 1 or (following is not None and following != "" and not following.startswith("#")):
                raise ConfigError(f"{line.where}: '{attrib}' cannot be combined with other Match attributes")
            return (not negate) if result else False
        attributes += 1
        if name in ("canonical", "final"):
            if name == "final":
                context.want_final_pass = True
            if context.final_pass == negate:
                result = False
            continue
        if index >= len(args) or args[index] == "" or args[index].startswith("#"):
            raise ConfigError(f"{line.where}: Missing Match criteria for {attrib}")
        arg = args[index]
        index += 1
        if name == "host":
            matched = match_hostname(host, arg) == 1
        elif name == "originalhost":
            matched = match_hostname(context.original_host, arg) == 1
        elif name == "user":
            matched = match_pattern_list(ruser, arg, False) == 1
        elif name == "localuser":
            matched = match_pattern_list(context.local.name, arg, False) == 1
        else:
            raise ConfigError(f"{line.where}: Unsupported Match attribute {attrib}")
        if matched == negate:
            result = False
    if attributes == 0:
        raise ConfigError(f"{line.where}: One or more attributes required for Match")
    return result


def _include(line: Line, options: Options, context: Context, active: bool, nevermatch: bool,
             depth: int, chain: tuple[str, ...]) -> None:
    for arg in line.args:
        if arg == "":
            raise ConfigError(f"{line.where}: keyword include empty argument")
        pattern = arg if arg.startswith(("/", "~")) else "~/.ssh/" + arg
        if pattern.startswith("~"):
            name, _, tail = pattern[1:].partition("/")
            home = (os.environ.get("HOME") or context.local.home) if not name else os.path.expanduser("~" + name)
            pattern = home.rstrip("/") + "/" + tail if not home.startswith("~") else pattern
        # glob(3) as ssh calls it: sorted (C collation), wildcards never match a leading dot.
        for path in sorted(glob.glob(pattern)):
            read_config(path, options, context, active=active, nevermatch=nevermatch or not active,
                        depth=depth + 1, check=True, chain=chain, including=line.where)


def read_config(path: str, options: Options, context: Context, *, active: bool = True, nevermatch: bool = False,
                depth: int = 0, check: bool = False, chain: tuple[str, ...] = (), including: str = "") -> bool:
    """Read one file into options; returns the active flag at its end (Include restores the includer's)."""
    if depth > MAX_DEPTH:
        raise ConfigError(f"{including}: Include nests deeper than {MAX_DEPTH} files (ssh: \"Too many recursive "
                          f"configuration includes\"): {' -> '.join((*chain[-3:], path))}")
    if check:
        check_config_file(path, including)
    if os.path.isdir(path):
        return active  # fopen(3) opens a directory and reads nothing: ssh takes it as empty
    try:
        lines = read_lines(path)
    except LineError as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{including or path}: cannot read ssh config {path}: {exc.strerror}") from None
    if _VALIDATED.get(id(lines)) is not lines:
        _validate(lines, context)
        if len(_VALIDATED) > 1024:  # file versions seen by a long-running bot: keep it bounded
            _VALIDATED.clear()
        _VALIDATED[id(lines)] = lines
    chain = (*chain, path)
    for line in lines:
        active = _line(line, options, context, active, nevermatch, depth, chain)
    return active


# Each file version's lines, once every value in them was checked (ssh rejects a bad value even in a block that
# does not apply): later passes skip the lines of blocks that do not apply without looking at them.
_VALIDATED: dict[int, tuple[Line, ...]] = {}


def _validate(lines: tuple[Line, ...], context: Context) -> None:
    from commands.ssh_config.taken import take

    scratch = Context(host="", original_host="", final_pass=False, local=context.local)
    for line in lines:
        if line.keyword in TAKEN and line.keyword not in ("host", "match", "include"):
            take(line, Options(), scratch, False)
        elif (problem := bad_value(line.keyword, line.args)) is not None:
            raise ConfigError(f"{line.where}: {problem}")


def _line(line: Line, options: Options, context: Context, active: bool, nevermatch: bool, depth: int,
          chain: tuple[str, ...]) -> bool:
    keyword = line.keyword
    if keyword not in KNOWN:
        if options.ignored_unknown is not None and match_pattern_list(keyword, options.ignored_unknown, True) == 1:
            return active
        raise ConfigError(f"{line.where}: Bad configuration option: {keyword}")
    if keyword == "host":
        context.block = "Host " + " ".join(line.args)
        return _host_line(line, context, nevermatch)
    if keyword == "match":
        context.block = "Match " + " ".join(line.args)
        matched = _match_line(line, options, context)
        return False if nevermatch else matched
    if keyword == "include":
        block = context.block
        _include(line, options, context, active, nevermatch, depth, chain)
        context.block = block
        return active
    if keyword in NO_OP:
        return active
    if not active:
        return active  # its value was checked once, when the file was read
    if keyword not in TAKEN:
        if keyword not in options.other:
            options.other[keyword] = line
        return active
    from commands.ssh_config.taken import take
    take(line, options, context, active)
    return active
