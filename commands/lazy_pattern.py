"""A regular expression compiled the first time it is used, from re's program written out when there is one.

Compiling is Python code (``re._parser``, ``re._compiler``: ~0.1-0.7 ms a pattern): redaction's ~70 patterns cost
a cold verify ~11 ms of CPU compiled up front, though its texts open few of their gates (issue 27). A pattern is
compiled when a rule first needs it; on the Python that scripts/pattern_codes.py ran on, from the program it wrote
(commands.pattern_codes: what ``re.compile`` hands ``_sre.compile`` in the end, so the same pattern object, built
in C; tests/test_pattern_codes.py compares them). Anything else, and any other Python, compiles as usual.
"""

from __future__ import annotations

import re
import sys
from typing import Any


class LazyPattern:
    """``pattern`` under ``flags``, compiled by ``compiled`` on first use. Two threads there at once may each compile
    it: the same pattern either way, one of them kept."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = compile_pattern(self.pattern, self.flags)
        return compiled

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags!r})"


def compile_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``: built from its written-out program where this Python is the table's."""
    written = _written_programs().get((pattern, flags))
    if written is None:
        return re.compile(pattern, flags)
    sre: Any = re._compiler._sre  # type: ignore[attr-defined]  # the C engine re.compile ends in
    final_flags, program, groups, groupindex, indexgroup = written
    code = memoryview(bytes.fromhex(program)).cast("I").tolist()
    compiled: re.Pattern[str] = sre.compile(pattern, final_flags, code, groups, dict(groupindex), indexgroup)
    return compiled


_programs: dict[tuple[str, int], tuple[Any, ...]] | None = None


def _written_programs() -> dict[tuple[str, int], tuple[Any, ...]]:
    """commands.pattern_codes' table if it was written on this very Python (implementation, version, engine) and
    machine word order, else none: another Python's compiler may write another program."""
    global _programs
    if _programs is None:
        from commands import pattern_codes

        same = (sys.implementation.name == "cpython" and tuple(sys.version_info[:3]) == pattern_codes.PYTHON
                and re._compiler._sre.MAGIC == pattern_codes.SRE_MAGIC  # type: ignore[attr-defined]
                and sys.byteorder == pattern_codes.BYTE_ORDER and memoryview(b"\0" * 4).cast("I").itemsize == 4)
        _programs = pattern_codes.CODES if same else {}
    return _programs
