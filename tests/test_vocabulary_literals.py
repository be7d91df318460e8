"""Tier 1: check statuses, verdicts and audit event kinds are spelled out only in commands/vocabulary.py and
in the front-ends' word tables (issue 20); everywhere else code names them through the enums.

What counts, in commands/ and bot/ (prose that merely contains "pass" does not):
- a comparison with such a literal (``status == "pass"``, ``kind in ("check", "step")``, ``case "fail":``);
- a dict literal giving one to a key ``status``, ``verdict`` or ``kind`` (``{"verdict": "error"}``);
- a call argument: a keyword ``status=``/``verdict=``/``kind=``, or a positional one
  (``Finding(name, "pass", …)``, ``append("finished", …)``);
- what a function typed to return a status or verdict returns (``-> Verdict: return "pass"``);
- an SQL fragment naming one: ``kind = 'finished'``, ``kind IN ('approved', …)``, ``state = 'pending'``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from commands.store.migrations import MIGRATIONS
from commands.vocabulary import CheckStatus, EventKind, PlanState, Verdict
from tests.conftest import REPO
from tests.source_ast import parse_source

WORDS = frozenset({*CheckStatus, *Verdict, *EventKind})
SQL_WORDS = frozenset({*WORDS, *PlanState})
KEYS = frozenset({"status", "verdict", "kind"})
LOOKUPS = frozenset({"get", "pop", "setdefault"})  # ``response.get("error")``: a key of someone else's dict
# The migrations released before the vocabulary: never edited again (a new migration changes the schema).
FROZEN_SQL = frozenset(sql for _, sql in MIGRATIONS[:7])
TYPED_RETURNS = re.compile(r"\b(Verdict|Status|CheckStatus|Outcome|EventKind|RolloutVerdict)\b")
SQL = re.compile(r"\b(?:kind|state|verdict|status)\s*(?:=|!=|IN|NOT IN)\s*\(?\s*'([a-z-]+)'", re.IGNORECASE)
SQL_LIST = re.compile(r"\b(?:kind|state|verdict|status)\s+(?:NOT\s+)?IN\s*\(([^)]*)\)", re.IGNORECASE)

# The vocabulary itself, and the front-ends' tables of words and glyphs (each maps the enums to a word).
ALLOWED = frozenset({"commands/vocabulary.py"})


def _word(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and node.value in WORDS else None


def _words(node: ast.AST) -> Iterator[ast.AST]:
    """The literal, or each literal of a tuple, list or set made of them alone (``in ("check", "step")``;
    a set of another domain's words that shares one, as known_hosts' ``"expired"`` certificate, is not)."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        if node.elts and all(_word(element) for element in node.elts):
            yield from node.elts
    elif _word(node):
        yield node


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of docstring constants: prose about the SQL (``WHERE state = 'pending'``) is not SQL."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _returns_a_word(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    if function.returns is None or not TYPED_RETURNS.search(ast.unparse(function.returns)):
        return
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and node.value is not None:
            yield from _words(node.value)
        if (isinstance(node, ast.IfExp) and _word(node.body)) or (isinstance(node, ast.IfExp) and _word(node.orelse)):
            yield node


def _sql_words(text: str) -> list[str]:
    found = [match.group(1) for match in SQL.finditer(text)]
    for listed in SQL_LIST.finditer(text):
        found += re.findall(r"'([a-z-]+)'", listed.group(1))
    return sorted({word for word in found if word in SQL_WORDS})


def offences(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) for each place that spells a status, verdict or kind out."""
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                for literal in _words(side):
                    yield literal.lineno, f"compares with {ast.unparse(literal)}"
        elif isinstance(node, ast.MatchValue):
            for literal in _words(node.value):
                yield literal.lineno, f"matches {ast.unparse(literal)}"
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in KEYS:
                    for literal in _words(value):
                        yield literal.lineno, f"gives {key.value!r} the literal {ast.unparse(literal)}"
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in KEYS:
                    for literal in _words(keyword.value):
                        yield literal.lineno, f"passes {keyword.arg}={ast.unparse(literal)}"
            lookup = isinstance(node.func, ast.Attribute) and node.func.attr in LOOKUPS
            for argument in () if lookup else node.args:
                if _word(argument):
                    yield argument.lineno, f"passes {ast.unparse(argument)} to {ast.unparse(node.func)}"
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for literal in _returns_a_word(node):
                yield literal.lineno, f"{node.name} returns the literal {ast.unparse(literal)}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose \
                and node.value not in FROZEN_SQL:
            for word in _sql_words(node.value):
                yield node.lineno, f"SQL names '{word}'"


def tree_offences() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted([*(REPO / "commands").rglob("*.py"), *(REPO / "bot").rglob("*.py")]):
        name = path.relative_to(REPO).as_posix()
        if name in ALLOWED:
            continue
        said = sorted(set(offences(parse_source(path.read_text(), name))))
        if said:
            found[name] = [f"{name}:{line}: {what}" for line, what in said]
    return found


def test_statuses_verdicts_and_kinds_are_named_through_the_vocabulary() -> None:
    found = tree_offences()
    new = [line for lines in found.values() for line in lines]
    assert new == [], "spelled out instead of named through commands/vocabulary.py:\n" + "\n".join(new)


def test_allowed_files_exist() -> None:
    assert all((REPO / name).is_file() for name in ALLOWED)


def test_the_checker_finds_each_kind_of_offence() -> None:
    code = '''
def judge(finding) -> Verdict:
    if finding.status == "fail" or kind in ("check", "step"):
        return "fail"
    match finding.status:
        case "warn":
            pass
    record({"verdict": "error", "summary": "pass the salt"}, status="skipped")
    append("finished", details={"text": "refused"})
    query("SELECT 1 FROM events WHERE kind = 'requested' AND state IN ('pending', 'void')")
    say("the check did not pass", response.get("error"))
'''
    assert sorted(offences(parse_source(code))) == [
        (3, "compares with 'check'"), (3, "compares with 'fail'"), (3, "compares with 'step'"),
        (4, "judge returns the literal 'fail'"), (6, "matches 'warn'"), (8, "gives 'verdict' the literal 'error'"),
        (8, "passes status='skipped'"), (9, "passes 'finished' to append"), (10, "SQL names 'pending'"),
        (10, "SQL names 'requested'"), (10, "SQL names 'void'"),
    ]  # and neither the prose ("pass the salt", "did not pass") nor a key looked up
