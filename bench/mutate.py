"""Mutation run over proofbot's pure core: each small slip a test should catch, tried one at a time.

No root, no network. Run: .venv/bin/python -m bench.mutate [--budget 900] [--sample 120] [--seed 21]
[--only commands/redact.py] [--list]. For each module of the core (check parsers, findings,
redaction, the audit chain, approvals, locks) it makes mutants with Python's own ``ast``: a
comparison flipped (``==``/``!=``, ``<``/``<=``, ``in``/``not in``), ``and``/``or`` swapped, a
``not`` dropped, an integer bound moved by one, ``True``/``False`` swapped. Each mutant replaces
its module in a scratch copy of the repository and that module's fast unit tests run against
it (``pytest -x``): a failure or a timeout kills it, a pass lets it survive. Bounded: a seeded
sample of ``--sample`` mutants, stopped at ``--budget`` seconds (what is left untried is said).
Prints the score (killed / tried) and every survivor as ``file:line: before -> after``; README
"Mutation run" keeps the score and why each survivor left is equivalent.
"""

from __future__ import annotations

import argparse
import ast
import copy
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# module -> the fast tier-1 tests that judge it (seconds each, no lab)
TARGETS: dict[str, tuple[str, ...]] = {
    "commands/redact.py": ("tests/test_redact.py",),
    "commands/findings.py": ("tests/test_check_parsers.py", "tests/test_redact.py"),
    "commands/checks/cmdline.py": ("tests/test_check_parsers.py",),
    "commands/checks/files.py": ("tests/test_check_parsers.py",),
    "commands/checks/file_times.py": ("tests/test_check_parsers.py",),
    "commands/checks/extra_files.py": ("tests/test_check_parsers.py",),
    "commands/checks/service.py": ("tests/test_check_parsers.py",),
    "commands/checks/stale.py": ("tests/test_check_parsers.py",),
    "commands/checks/probe.py": ("tests/test_restart_verdict.py",),
    "commands/checks/package.py": ("tests/test_package_parser.py",),
    "commands/checks/deb.py": ("tests/test_deb_parser.py",),
    "commands/store/chain.py": ("tests/test_audit_chain.py",),
    "commands/store/approvals.py": ("tests/test_audit_approvals.py",),
    "commands/store/locks.py": ("tests/test_store_locks.py", "tests/test_rollout_locks.py"),
}
EDGES = "tests/test_edges.py"  # the boundaries each module's own tests missed: run with every module
FLIPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
TEST_TIMEOUT_S = 120


@dataclass(frozen=True)
class Mutant:
    module: str
    index: int  # the index-th mutation site of the module, in ast.walk order
    line: int
    before: str
    after: str


def _sites(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every node that can be mutated, with the kind of mutation, in a stable order. Docstrings,
    annotations and constants inside f-strings are left alone: slips there change no behaviour."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.AnnAssign, ast.arg)) and getattr(node, "annotation", None) is not None:
            skip.update(id(n) for n in ast.walk(node.annotation))  # type: ignore[arg-type]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            skip.update(id(n) for n in ast.walk(node.returns))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            yield from ((node, f"cmp{i}") for i, op in enumerate(node.ops) if type(op) in FLIPS)
        elif isinstance(node, ast.BoolOp):
            yield node, "boolop"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "not"
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield node, "bool"
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield node, "int"


class _Apply(ast.NodeTransformer):
    def __init__(self, target: ast.AST, kind: str) -> None:
        self.target, self.kind = target, kind

    def visit(self, node: ast.AST) -> ast.AST:
        node = super().visit(node)
        if node is not self.target:
            return node
        if self.kind.startswith("cmp"):
            assert isinstance(node, ast.Compare)
            i = int(self.kind[3:])
            node.ops[i] = FLIPS[type(node.ops[i])]()
        elif self.kind == "boolop":
            assert isinstance(node, ast.BoolOp)
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif self.kind == "not":
            assert isinstance(node, ast.UnaryOp)
            return node.operand
        elif self.kind == "bool":
            assert isinstance(node, ast.Constant)
            node.value = not node.value
        elif self.kind == "int":
            assert isinstance(node, ast.Constant)
            node.value = node.value + 1
        return node


def mutants(module: str) -> list[Mutant]:
    source = (REPO / module).read_text()
    tree = ast.parse(source)
    found = []
    for index, (node, kind) in enumerate(_sites(tree)):
        before = ast.get_source_segment(source, node) or ast.unparse(node)
        copied = copy.deepcopy(node)
        mutated_node = _Apply(copied, kind).visit(copied)
        found.append(Mutant(module, index, getattr(node, "lineno", 0), " ".join(before.split())[:80],
                            " ".join(ast.unparse(mutated_node).split())[:80]))
    return found


def mutated_source(source: str, index: int) -> str:
    tree = ast.parse(source)
    node, kind = list(_sites(tree))[index]
    return ast.unparse(ast.fix_missing_locations(_Apply(node, kind).visit(tree)))


def run(mutant: Mutant, scratch: Path) -> str:
    """'killed', 'timeout' (killed too) or 'survived'."""
    original = (REPO / mutant.module).read_text()
    target = scratch / mutant.module
    target.write_text(mutated_source(original, mutant.index))
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                 "-p", "no:randomly", *TARGETS[mutant.module], EDGES], cwd=scratch,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        target.write_text(original)
    return "survived" if result.returncode == 0 else "killed"


def scratch_copy(into: Path) -> Path:
    """The sources and tests (not the venv, git or lab cache), so mutants never touch the work tree."""
    for name in ("commands", "bot", "tests", "bench", "pyproject.toml", "manifest.yml", "inventory.example.yml"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            shutil.copy2(source, into / name)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for the whole run")
    parser.add_argument("--sample", type=int, default=120, help="mutants tried at most (a seeded sample)")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--only", action="append", help="a module of TARGETS (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    args = parser.parse_args()
    modules = args.only or list(TARGETS)
    unknown = [m for m in modules if m not in TARGETS]
    if unknown:
        parser.error(f"not a module of the core: {', '.join(unknown)} (one of: {', '.join(TARGETS)})")
    every = [m for module in modules for m in mutants(module)]
    chosen = sorted(random.Random(args.seed).sample(every, min(args.sample, len(every))),
                    key=lambda m: (m.module, m.index))
    if args.list:
        for m in chosen:
            print(f"{m.module}:{m.line}: {m.before} -> {m.after}")
        return 0
    started, tried, killed, survivors = time.monotonic(), 0, 0, []
    with tempfile.TemporaryDirectory(prefix="proofbot-mutate-") as tmp:
        scratch = scratch_copy(Path(tmp))
        for mutant in chosen:
            if time.monotonic() - started > args.budget:
                break
            outcome = run(mutant, scratch)
            tried += 1
            if outcome == "survived":
                survivors.append(mutant)
                print(f"survived {mutant.module}:{mutant.line}: {mutant.before} -> {mutant.after}", flush=True)
            else:
                killed += 1
    elapsed = time.monotonic() - started
    print(f"\nmutation score: {killed}/{tried} killed ({100 * killed / max(tried, 1):.0f} %) of {len(every)} "
          f"mutants in {len(modules)} modules; {len(chosen) - tried} sampled left untried at the "
          f"{args.budget:.0f} s budget; {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
