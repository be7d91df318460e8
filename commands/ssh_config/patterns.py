"""OpenSSH's pattern matching (match.c), exactly: ``*`` and ``?`` wildcards, comma-separated lists with ``!``.

``Host`` lines take whitespace-separated patterns, each matched whole by ``match_pattern`` (a comma is
an ordinary character there: ``Host web1,web2`` matches only that literal name); ``Match host``,
``Match user`` and known_hosts take comma-separated lists (``match_pattern_list``).
"""

from __future__ import annotations

import re
from functools import lru_cache

# match.c copies each sub-pattern into a 1024-byte buffer; a longer one fails the whole list.
SUBPATTERN_MAX = 1023


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    parts = [".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern]
    return re.compile("".join(parts), re.DOTALL)


def match_pattern(string: str, pattern: str) -> bool:
    """match.c match_pattern: the whole string against one pattern (case-sensitive)."""
    return _compiled(pattern).fullmatch(string) is not None


def match_pattern_list(string: str, pattern: str, dolower: bool) -> int:
    """match.c match_pattern_list: -1 a negated pattern matched, 1 a positive one did, 0 none.

    With ``dolower`` the patterns (not the string) are lower-cased, as OpenSSH does."""
    got_positive = 0
    index, length = 0, len(pattern)
    while index < length:
        negated = pattern[index] == "!"
        if negated:
            index += 1
        end = pattern.find(",", index)
        end = length if end < 0 else end
        sub = pattern[index:end]
        if len(sub) >= SUBPATTERN_MAX:
            return 0
        index = end + 1 if end < length else end
        if dolower:
            sub = "".join(char.lower() if "A" <= char <= "Z" else char for char in sub)
        if match_pattern(string, sub):
            if negated:
                return -1
            got_positive = 1
    return got_positive


def lower_ascii(text: str) -> str:
    """C tolower() in the C locale: only A-Z change."""
    return "".join(char.lower() if "A" <= char <= "Z" else char for char in text)


def match_hostname(host: str, pattern: str) -> int:
    """match.c match_hostname: the host lower-cased against a comma-separated list."""
    return match_pattern_list(lower_ascii(host), pattern, True)
