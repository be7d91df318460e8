"""What a CLI command prints last: a result as README shows it or as one ``--json`` object, and its exit code."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from bot.cli.marks import EXIT_FOR_VERDICT

if TYPE_CHECKING:
    from commands.operation import OperationResult

SCHEMA_VERSION = 1  # of every --json object; raised when a key changes meaning or goes away


def json_text(data: object) -> str:
    """A ``--json`` object as printed: indented for a person at a terminal; to a pipe or a file (jq, a script) on
    one line, which json's C encoder writes (``indent=`` falls back to its pure-Python encoder: ~30k calls for a
    20-host fleet's object). The same data either way (tests/test_cli_json_text.py)."""
    if sys.stdout.isatty():
        return json.dumps(data, indent=2, ensure_ascii=False)
    return json.dumps(data, ensure_ascii=False)


def print_result(result: OperationResult, *, as_json: bool, verbose: bool, strict: bool = False) -> int:
    """Print the result as README shows it (or as one JSON object) and return its exit code;
    ``strict``: a pass with a warning exits 1."""
    from bot.cli.results_text import render_result, strict_reason

    if as_json:
        print(json_text({"schema_version": SCHEMA_VERSION, **result.to_json()}))
    else:
        print(render_result(result, verbose=verbose))
    reason = strict_reason(result) if strict else None
    if reason is not None:
        print(f"proofbot: {reason}", file=sys.stderr)
        return 1
    return EXIT_FOR_VERDICT[result.verdict]
