"""The inventory loader against its recorded corpus (tests/inventory_corpus.py): >= 500 inventories from the tests,
docs and example plus seeded mutations, each parsed to the same Inventory (every field) or refused with the same
message, hint and problems as when recorded. A difference is a change in what an operator reads."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.inventory_corpus import CORPUS, HOME, outcome


def test_corpus_replays_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", HOME)
    with gzip.open(CORPUS, "rt", encoding="utf-8") as file:
        cases = json.load(file)
    kinds = {next(iter(case["outcome"])) for case in cases}
    assert len(cases) >= 500 and {"inventory", "error"} <= kinds
    different = [(case["text"], case["outcome"], now) for case in cases
                 if (now := outcome(case["text"])) != case["outcome"]]
    shown = "\n\n".join(f"--- text:\n{text}\n--- recorded: {json.dumps(was)[:1500]}\n--- now: {json.dumps(now)[:1500]}"
                        for text, was, now in different[:3])
    assert not different, f"{len(different)} of {len(cases)} inventories read differently:\n{shown}"
