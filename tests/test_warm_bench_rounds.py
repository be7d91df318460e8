"""bench/warm_bench.py's whole-process rounds: a process that exits non-zero (a connect timeout under load) loses
its round, recorded and said, and the medians are over the rounds that completed, with their count; real child
processes (a counter file makes the third run of one fail)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.warm_bench import report_fleet, run_rounds

FAIL_THIRD = """
import pathlib, sys
count = pathlib.Path(sys.argv[1])
count.write_text(str(int(count.read_text() or 0) + 1) if count.exists() else "1")
if count.read_text() == "3":
    sys.exit("could not connect: timed out after 5 s")
"""


def test_a_failed_process_loses_its_round_and_the_rest_are_reported(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    argvs = {"floor": [sys.executable, "-c", "pass"],
             "proofbot": [sys.executable, "-c", FAIL_THIRD, str(tmp_path / "count")]}
    rounds = run_rounds(argvs, 3, {})  # a warm-up, then rounds 1-3; proofbot's third run is round 2's
    assert rounds.failed == ["round 2: proofbot exit 1 (could not connect: timed out after 5 s)"]
    assert (rounds.asked, rounds.completed) == (3, 2)
    assert [len(runs) for runs in rounds.runs.values()] == [2, 2], "round 2's floor run is left out with it: paired"
    assert report_fleet(20, rounds) == 0
    said = capsys.readouterr().out
    assert "FAILED round 2: proofbot exit 1 (could not connect: timed out after 5 s); that round is left out" in said
    assert "failed: round 2: proofbot exit 1" in said
    assert "| 20 hosts, whole process, median of 2 of 3 rounds (1 failed) |" in said
    assert "| `proofbot verify all` (proofbot) |" in said


def test_no_round_completed_is_said_and_exits_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    rounds = run_rounds({"floor": [sys.executable, "-c", "pass"],
                         "proofbot": [sys.executable, "-c", "raise SystemExit(3)"]}, 2, {})
    assert rounds.completed == 0 and len(rounds.failed) == 3  # the warm-up's too
    assert report_fleet(20, rounds) == 1
    assert "no whole-process round of 2 completed: no figure" in capsys.readouterr().out
