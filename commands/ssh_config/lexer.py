"""An OpenSSH client config file as lines of keyword and arguments, split exactly as ssh 9.2 splits them.

``split_line`` follows readconf.c's process_config_line (the keyword by misc.c's ``strdelim``: whitespace,
a quote or one ``=``; the rest by ``argv_split`` with quotes, ``\\`` escapes and a trailing ``# comment``).
A file is split once and kept while its inode, size and mtime stay the same (a fleet of 500 hosts reads
one config 500 times).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

WHITESPACE = " \t\r\n"


class LineError(ValueError):
    """A line OpenSSH itself rejects (ssh exits: "terminating, N bad configuration options")."""


@dataclass(frozen=True)
class Line:
    """One config line: the keyword lower-cased, its arguments, and the raw rest (ProxyCommand/ProxyJump/Match)."""

    path: str
    number: int
    keyword: str
    args: tuple[str, ...]
    rest: str
    written: str = ""  # the keyword as the file spells it (ServerAliveInterval), for messages

    @property
    def where(self) -> str:
        return f"{self.path} line {self.number}"


def _strdelim(text: str, pos: int) -> tuple[str, int | None]:
    """misc.c strdelim: the next token from pos and where the rest starts (None: nothing left)."""
    stops = WHITESPACE + '"='
    end = next((index for index in range(pos, len(text)) if text[index] in stops), None)
    if end is None:
        return text[pos:], None
    if text[end] == '"':
        close = text.find('"', end + 1)
        if close < 0:
            raise LineError("invalid quotes")
        token = text[pos:end] + text[end + 1:close]
        after = close + 1
        while after < len(text) and text[after] in WHITESPACE:
            after += 1
        return token, after
    equals = text[end] == "="
    token = text[pos:end]
    after = end + 1
    while after < len(text) and text[after] in WHITESPACE:
        after += 1
    if not equals and after < len(text) and text[after] == "=":
        after += 1
        while after < len(text) and text[after] in WHITESPACE:
            after += 1
    return token, after


def argv_split(text: str) -> list[str]:
    """misc.c argv_split(s, terminate_on_comment=1): quotes, \\\\ \\" \\' and (unquoted) "\\ " escapes."""
    args: list[str] = []
    index, length = 0, len(text)
    while index < length:
        if text[index] in " \t":
            index += 1
            continue
        if text[index] == "#":
            break
        quote = ""
        arg: list[str] = []
        while index < length:
            char = text[index]
            if char == "\\":
                following = text[index + 1] if index + 1 < length else ""
                if (following in ("'", '"', "\\") and following) or (not quote and following == " "):
                    index += 1
                    arg.append(following)
                else:
                    arg.append(char)
            elif not quote and char in " \t":
                break
            elif not quote and char in "\"'":
                quote = char
            elif quote and char == quote:
                quote = ""
            else:
                arg.append(char)
            index += 1
        if index >= length and quote:
            raise LineError("invalid quotes")
        args.append("".join(arg))
    return args


def split_line(raw: str) -> tuple[str, list[str], str, str] | None:
    """(keyword lower-cased, arguments, raw rest, keyword as written) of one line; None for a blank or comment line."""
    line = raw.rstrip(WHITESPACE + "\f") if raw.strip(WHITESPACE + "\f") else ""
    # OpenSSH strips trailing whitespace but keeps the line's first character (its loop stops at 1).
    if not line:
        return None
    keyword, after = _strdelim(line, 0)
    if keyword == "" and after is not None:
        keyword, after = _strdelim(line, after)
    if not keyword or keyword.startswith("#"):
        return None
    written, keyword = keyword, keyword.lower()
    rest = "" if after is None else line[after:].lstrip(WHITESPACE)
    if not rest:
        raise LineError(f'no argument after keyword "{keyword}"')
    return keyword, argv_split(rest), rest, written


_CACHE: dict[str, tuple[tuple[int, int, int], tuple[Line, ...]]] = {}
MAX_BYTES = 1024 * 1024


def read_lines(path: str, text: str | None = None) -> tuple[Line, ...]:
    """Every keyword line of the file (blank and comment lines left out), split once per file version.

    A line OpenSSH rejects raises LineError naming file and line: ssh refuses the whole file."""
    info = os.stat(path)
    key = (info.st_ino, info.st_size, info.st_mtime_ns)
    cached = _CACHE.get(path)
    if cached is not None and cached[0] == key and text is None:
        return cached[1]
    if text is None:
        if info.st_size > MAX_BYTES:
            raise LineError(f"{path}: larger than {MAX_BYTES // 1024} KiB")
        with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as handle:
            text = handle.read()
    lines: list[Line] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        try:
            split = split_line(raw)
        except LineError as exc:
            raise LineError(f"{path} line {number}: {exc}") from None
        if split is not None:
            lines.append(Line(path, number, split[0], tuple(split[1]), split[2], split[3]))
    result = tuple(lines)
    _CACHE[path] = (key, result)
    return result


@lru_cache(maxsize=4096)
def strdelim_all(rest: str) -> tuple[str, ...]:
    """The tokens readconf.c's match_cfg_line reads with strdelim (it does not use argv_split)."""
    tokens: list[str] = []
    pos: int | None = 0
    while pos is not None and pos < len(rest):
        token, pos = _strdelim(rest, pos)
        if token == "":
            break
        tokens.append(token)
    return tuple(tokens)
