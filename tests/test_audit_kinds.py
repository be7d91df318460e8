"""Tier 1: each audit event kind has one shape (commands/store/kinds.py): a finished event's verdict is a
Verdict or nothing is written, an operation's own facts never take a shared key's name, and a field not
known is left out (a view's json_extract reads NULL for it, as before the types)."""

from __future__ import annotations

import json

import pytest

from commands.store.events import plain
from commands.store.kinds import Finished, Refusal, Requested, Step
from commands.vocabulary import EventKind, Verdict
from tests.audit_events import cli_origin


def test_finished_always_carries_a_verdict() -> None:
    ending = Finished("refused", "planning failed")
    assert ending.verdict is Verdict.REFUSED and ending.KIND is EventKind.FINISHED
    assert json.dumps(plain(ending.details()), sort_keys=True) == \
        '{"summary": "planning failed", "verdict": "refused"}'
    with pytest.raises(ValueError, match="void"):
        Finished("void", "the plan differs from the one approved")  # a plan state, not a verdict


def test_an_operations_own_facts_never_shadow_a_shared_key() -> None:
    assert Finished(Verdict.PASS, extra={"old_pid": 1, "new_pid": None}).details() == {
        "verdict": Verdict.PASS, "old_pid": 1, "new_pid": None}  # extra kept as given, null included
    with pytest.raises(ValueError, match="counts"):
        Finished(Verdict.PASS, extra={"counts": {}}).details()
    with pytest.raises(ValueError, match="step"):
        Step("ready", {"step": "other"}).details()


def test_both_front_ends_refusals_have_one_shape() -> None:
    origin = cli_origin()
    cli = Refusal("unknown host 'ct999'", requested_host="ct999", origin=origin.to_json()).details()
    slack = Refusal("unknown host 'ct999'", requested_host="ct999", origin=origin.to_json(), text="ct999").details()
    assert set(slack) - set(cli) == {"text"} and {"reason", "requested_host", "origin"} <= set(cli)


def test_a_request_names_its_fleet_and_keeps_its_operations_facts() -> None:
    origin = cli_origin()
    details = Requested.of(origin, backup=None, checks=["main-pid"], fleet_operation_id=None).details()
    assert details == {"origin": origin.to_json(), "checks": ["main-pid"], "backup": None}
