"""Hold each package of the combined coverage data (scripts/coverage) to its floor; name every package under it.

A package is a directory of modules (its own files, not its subpackages'): `commands` alone is commands/*.py.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path, PurePosixPath

import coverage

DEFAULT_FLOOR = 85.0
# The pure core: the checks' parsers (what a finding says) and the audit store (what is proven and kept).
FLOORS = {"commands/checks": 95.0, "commands/store": 95.0}


def per_package(files: dict[str, dict[str, dict[str, int]]]) -> dict[str, tuple[int, int]]:
    """Statements and covered statements of each package, from coverage's JSON report."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, data in files.items():
        package = str(PurePosixPath(name).parent)
        totals[package][0] += data["summary"]["num_statements"]
        totals[package][1] += data["summary"]["covered_lines"]
    return {package: (statements, covered) for package, (statements, covered) in totals.items()}


def main() -> int:
    cov = coverage.Coverage()
    cov.load()
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "coverage.json"
        cov.json_report(outfile=str(report))
        document = json.loads(report.read_text())
    packages = per_package(document["files"])
    if not packages:
        print("coverage floors: no coverage data (run scripts/coverage first)", file=sys.stderr)
        return 2
    missed = []
    print(f"{'package':<24} {'stmts':>6} {'cover':>7} {'floor':>6}")
    for package, (statements, covered) in sorted(packages.items()):
        percent = 100.0 * covered / statements if statements else 100.0
        floor = FLOORS.get(package, DEFAULT_FLOOR)
        under = percent < floor
        print(f"{package:<24} {statements:>6} {percent:>6.1f}% {floor:>5.0f}%{'  UNDER ITS FLOOR' if under else ''}")
        if under:
            missed.append(f"{package} {percent:.1f}% (floor {floor:.0f}%)")
    total = document["totals"]["percent_covered"]
    print(f"{'overall':<24} {document['totals']['num_statements']:>6} {total:>6.1f}%")
    if missed:
        print("coverage floors missed: " + "; ".join(missed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
