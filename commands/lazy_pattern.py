"""A regular expression compiled the first time it is used.

Compiling is Python code (``re._parser``, ``re._compiler``: ~0.1-0.7 ms a pattern): redaction's ~70 patterns cost
a cold verify ~11 ms of CPU compiled up front, though its texts open few of their gates (issue 27). A pattern is
compiled when a rule first needs it.
"""

from __future__ import annotations

import re


class LazyPattern:
    """``pattern`` under ``flags``, compiled on first use. Two threads there at once may each compile it: the same
    pattern either way, one of them kept."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags!r})"
