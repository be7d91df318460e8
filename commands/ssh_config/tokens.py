"""OpenSSH's ``%`` tokens, ``${VAR}`` and ``~`` in config values (misc.c percent_expand, tilde_expand).

Tokens are expanded once, at the end, with the effective values (ssh.c): ``%r`` is the user after
``-l`` (the inventory's ``ssh.user``) and the config, ``%p`` the port after ``-p``, ``%h`` the final
host name. ``%%`` is one ``%``; an unknown token or an unset ``${VAR}`` is an error, as in ssh.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import socket
from collections.abc import Mapping
from dataclasses import dataclass


class ExpandError(ValueError):
    """A value ssh would refuse to expand (it exits)."""


@dataclass(frozen=True)
class LocalUser:
    """The user proofbot runs as, as ssh sees it (getpwuid(getuid()))."""

    name: str
    home: str
    uid: int

    @classmethod
    def current(cls) -> LocalUser:
        entry = pwd.getpwuid(os.getuid())
        return cls(entry.pw_name, entry.pw_dir, entry.pw_uid)


def expand(text: str, tokens: Mapping[str, str], dollar: bool = False) -> str:
    """misc.c vdollar_percent_expand: ``%X`` from tokens, ``%%``, and with ``dollar`` ``${VAR}``."""
    out: list[str] = []
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if dollar and text.startswith("${", index):
            end = text.find("}", index + 2)
            if end < 0:
                raise ExpandError(f"environment variable '{text[index + 2:]}' missing closing '}}'")
            name = text[index + 2:end]
            if not name:
                raise ExpandError("zero-length environment variable")
            value = os.environ.get(name)
            if value is None:
                raise ExpandError(f"env var ${{{name}}} has no value")
            out.append(value)
            index = end + 1
            continue
        if char != "%":
            out.append(char)
            index += 1
            continue
        index += 1
        if index >= length:
            raise ExpandError("invalid format (a lone % at the end)")
        key = text[index]
        if key == "%":
            out.append("%")
        elif key in tokens:
            out.append(tokens[key])
        else:
            raise ExpandError(f"unknown key %{key}")
        index += 1
    return "".join(out)


def tilde(path: str, user: LocalUser) -> str:
    """misc.c tilde_expand: ``~``, ``~/x`` (this user's home), ``~name/x``; other paths unchanged."""
    if not path.startswith("~"):
        return path
    rest = path[1:]
    if rest == "" or rest.startswith("/"):
        home, tail = user.home, rest.lstrip("/")
    else:
        name, _, tail = rest.partition("/")
        tail = tail.lstrip("/")
        try:
            home = pwd.getpwnam(name).pw_dir
        except KeyError:
            raise ExpandError(f"No such user {name}") from None
    return home + ("" if home.endswith("/") and home else "/") + tail


def client_tokens(*, host: str, host_arg: str, port: int, user: str, key_alias: str | None,
                  local: LocalUser) -> dict[str, str]:
    """ssh.c's DEFAULT_CLIENT_PERCENT_EXPAND_ARGS: C L i k l n p d h r u."""
    thishost = socket.gethostname()
    conn_hash = hashlib.sha1(f"{thishost}{host}{port}{user}".encode(errors="surrogateescape")).hexdigest()
    return {"C": conn_hash, "L": thishost.split(".")[0], "i": str(local.uid), "k": key_alias or host_arg,
            "l": thishost, "n": host_arg, "p": str(port), "d": local.home, "h": host, "r": user,
            "u": local.name}
