"""``ast.parse`` for tests that read proofbot's own source, with the garbage collector held off.

CPython 3.11 (before 3.11.8, gh-106905) keeps one AST-construction depth counter per interpreter: a
finalizer run by the collector in the middle of ``ast.parse`` that itself parses (3.11's traceback
formatting does, for its carets) leaves the counter off and the outer parse raises ``SystemError:
AST constructor recursion depth mismatch``. Collecting first and pausing the collector keeps the
parse whole; it changes nothing about what the tests assert.
"""

from __future__ import annotations

import ast
import gc
from typing import Any


def parse_source(source: str, filename: str = "<unknown>", **kwargs: Any) -> ast.Module:
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename, **kwargs)
    finally:
        if was_enabled:
            gc.enable()
