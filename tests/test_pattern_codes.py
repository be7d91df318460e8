"""Tier 1: redaction's patterns built from commands.pattern_codes' written-out programs are re.compile's own.

The table is scripts/pattern_codes.py's output on the Python it names; on that Python every entry must build the
pattern ``re.compile`` builds (CPython's pattern equality compares pattern, flags and the compiled program), and the
table must be what the script writes now (a rule added or changed in redact.py: run the script). On another Python
the table is not used at all.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from commands import lazy_pattern, pattern_codes
from tests.conftest import REPO

THIS_PYTHON = (sys.implementation.name == "cpython" and tuple(sys.version_info[:3]) == pattern_codes.PYTHON)


@pytest.mark.skipif(not THIS_PYTHON, reason="the table is for another Python: it is not used here (next test)")
def test_the_table_is_what_the_script_writes_for_redactions_patterns_now() -> None:
    run = subprocess.run([sys.executable, "scripts/pattern_codes.py", "--check"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_the_table_is_used_only_on_its_own_python() -> None:
    assert bool(lazy_pattern._written_programs()) == THIS_PYTHON


@pytest.mark.parametrize("key", list(pattern_codes.CODES), ids=lambda key: key[0][:40])
def test_each_pattern_built_from_its_program_is_the_one_re_compiles(key: tuple[str, int]) -> None:
    pattern, flags = key
    built, compiled = lazy_pattern.compile_pattern(pattern, flags), re.compile(pattern, flags)
    assert built == compiled
    assert (built.flags, built.groups, dict(built.groupindex)) == (compiled.flags, compiled.groups,
                                                                    dict(compiled.groupindex))


def test_a_pattern_not_in_the_table_compiles_as_usual() -> None:
    assert lazy_pattern.compile_pattern(r"(?P<word>\w+) not (redaction's)") == re.compile(r"(?P<word>\w+) not "
                                                                                          r"(redaction's)")
    assert lazy_pattern.LazyPattern(r"a(b)c", re.I).compiled.sub("x", "zABCz") == "zxz"
