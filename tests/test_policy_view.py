"""Tier 1: what `/policy` and `proofbot policy` show, pure: each operation on a target with the policy that rules
it (the strictest host's over a group, restore left to its hosts), and the Block Kit within Slack's limits
(50 blocks, members named up to a cap, a group Slack could not tell said so, a policy that cannot be met now)."""

from __future__ import annotations

import json
from typing import Any

from bot.cli.policy import render
from bot.slack.policy_blocks import MEMBERS_SHOWN, MESSAGE_LINES_MAX, GroupSeen, policy_message
from commands.inventory.policy_view import every_policy, policies_on
from tests.test_policies import inventory


def lines_of(message: tuple[str, list[dict[str, Any]]]) -> list[str]:
    return [block["text"]["text"] for block in message[1] if block["type"] == "section"]


def test_a_target_shows_each_operation_with_the_policy_that_rules_it() -> None:
    inv = inventory(approvals={"approvers": ["U0OLD"], "allow_self_approval": True})
    on_a = policies_on(inv, "a")
    assert [(line.applied.index, line.operations) for line in on_a.lines] == [
        (1, ("verify",)), (0, ("restore", "restart")), (2, ("ping",))]
    assert on_a.group_note is None and on_a.hosts == ("a",)
    on_b = policies_on(inv, "b")  # no written policy covers b's restore or restart: the flat approvals
    assert [(line.applied.index, line.operations) for line in on_b.lines] == [
        (1, ("verify",)), (2, ("restore", "restart", "ping"))]
    assert on_b.lines[1].self_approval  # allow_self_approval holds in the implicit policy only
    everywhere = policies_on(inv, "all")  # a group: the strictest host's, and no restore line
    assert [(line.applied.index, line.operations) for line in everywhere.lines] == [
        (1, ("verify",)), (0, ("restart",)), (2, ("ping",))]
    assert "a restore takes one host" in (everywhere.group_note or "")
    text = render(everywhere)
    assert "  restart: policy 0 · 2 of @sre-oncall, U0AAA · from C0PROD" in text
    assert "  ping: policy 2 (implicit: approvals) · no approval needed · from any channel" in text
    assert "user groups @sre-oncall: their members need Slack" in text
    assert json.loads(json.dumps(everywhere.to_json()))["policies"][1]["required"] == 2


def test_the_answer_names_members_up_to_a_cap_and_says_what_slack_could_not_tell() -> None:
    many = [f"U0M{i:03d}" for i in range(MEMBERS_SHOWN + 4)]
    view = policies_on(inventory(), "a")
    shown = "\n".join(lines_of(policy_message(view, {"@sre-oncall": GroupSeen(frozenset(many))}, {"C0PROD"})))
    assert f"`@sre-oncall` ({len(many)} members: <@U0M000>," in shown and ", … 4 more), <@U0AAA>" in shown
    assert "<@U0M008>" not in shown
    down = "\n".join(lines_of(policy_message(view, {"@sre-oncall": GroupSeen(None, "Slack answered 'ratelimited'")},
                                             set())))
    assert "`@sre-oncall` (not checked: Slack answered 'ratelimited')" in down
    assert "from 1 channel(s) you are not in" in down and "C0PROD" not in down
    alone = "\n".join(lines_of(policy_message(view, {"@sre-oncall": GroupSeen(frozenset({"U0AAA"}))}, set())))
    assert "only 1 distinct approver(s) now, 2 required" in alone  # the group's one member is also named by id


def test_the_answer_stays_within_slacks_block_limit() -> None:
    policies = [{"targets": ["a"], "operations": ["restart"], "approvers": [f"U0P{i:03d}"]} for i in range(70)]
    text, blocks = policy_message(every_policy(inventory(policies)), {}, set())
    assert text == "Who may do what, where: 71 policies"
    assert len(blocks) <= 50 and json.dumps(blocks).count('"section"') == MESSAGE_LINES_MAX + 1
    assert blocks[-1]["elements"][0]["text"].startswith("… 31 more: `proofbot policy`")
    never = render(every_policy(inventory([{"targets": ["a"], "operations": ["restore"], "approvers": []}])))
    assert "0: a · restore · 1 of nobody · from any channel · never satisfied: no approvers" in never
