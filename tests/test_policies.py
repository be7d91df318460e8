"""Tier 1: `policies:` (issue 24): validated at its lines, first match wins, the strictest host's policy over a
group, `inventory check` on policies that can never be satisfied, and ``decide`` counting distinct approvals
(by id and through a Slack user group), refusing the requester, a second click, a group that cannot be
resolved, and a member removed from a group once the cache refreshes; every click audited."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from commands.approvers import GroupCache, Rule, resolve
from commands.errors import CouldNotCheck, InventoryError, Refused
from commands.inventory import Approvals, Inventory, parse_inventory
from commands.store import approvals
from commands.store.db import AuditStore
from tests.conftest import run_cli, write_inventory
from tests.test_inventory_check import SERVICE, usable_inventory

HOSTS = {"a": {"address": "10.0.0.1", "service": SERVICE}, "b": {"address": "10.0.0.2", "service": SERVICE}}
POLICIES = [
    {"targets": ["prod"], "operations": ["restart", "restore"], "approvers": ["@sre-oncall", "U0AAA"],
     "required": 2, "channels": ["C0PROD"]},
    {"targets": ["all"], "operations": ["verify"], "approvers": [], "channels": ["C0OPS", "C0PROD"]},
]


def inventory(policies: list[dict[str, Any]] | None = POLICIES, **top: Any) -> Inventory:
    document: dict[str, Any] = {"hosts": HOSTS, "groups": {"prod": ["a"]}, **top}
    if policies is not None:
        document["policies"] = policies
    return parse_inventory(json.dumps(document, indent=1), "i.yml")


def problems_of(text: str) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        parse_inventory(text, "i.yml")
    return caught.value.message.splitlines()


def test_bad_policies_are_said_at_their_lines() -> None:
    text = """hosts:
  a: {address: 10.0.0.1}
policies:
  - {targets: [a], operations: [restart], approvers: [U0AAA]}
  - {targets: [nope], operations: [restart], approvers: [U0AAA]}
  - {targets: [a], operations: [frob], approvers: [bob], required: 0, chanels: [C1]}
"""
    assert problems_of(text) == [
        "i.yml:5: policies[1].targets[0]: unknown host or group 'nope'",
        "i.yml:6: policies.2.operations: 'frob' is not an operation a policy covers; one of: verify, restore, "
        "restart, ping (a rolling restart is a restart)",
        "i.yml:6: policies.2.approvers: not a Slack user id (U…) or user group handle (@name): 'bob'",
        "i.yml:6: policies.2.required: Input should be greater than or equal to 1",
        "i.yml:6: policies.2.chanels: not an inventory key; did you mean `channels`?",
    ]


def test_first_match_wins_and_the_flat_approvals_are_the_implicit_last_policy() -> None:
    inv = inventory(approvals={"approvers": ["U0OLD"], "allow_self_approval": True}, channels=["C0ANY"])
    prod = inv.policy("restart", ["a"])
    assert (prod.index, prod.policy.required, prod.implicit) == (0, 2, False)
    assert inv.policy("verify", ["a"]).index == 1  # the first policy does not cover verify
    last = inv.policy("restart", ["b"])  # no written policy covers b's restart
    assert (last.index, last.implicit, last.allow_self_approval) == (2, True, True)
    assert (last.policy.approvers, last.policy.channels, last.policy.required) == (["U0OLD"], ["C0ANY"], 1)
    # a rolling restart over both hosts takes the strictest host's policy
    assert inv.policy("rollout", ["b", "a"]).index == 0
    # no policies at all: every operation is the flat approvals, as before
    assert inventory(None, approvals={"approvers": ["U0OLD"]}).policy("restore", ["a"]).policy.approvers == ["U0OLD"]


async def test_inventory_check_names_policies_that_can_never_be_satisfied(tmp_path: Path) -> None:
    document = usable_inventory(tmp_path, a={"address": "127.0.0.1", "port": 9, "service": SERVICE})
    document["policies"] = [
        {"targets": ["a"], "operations": ["restart"], "approvers": []},
        {"targets": ["a"], "operations": ["restore"], "approvers": ["U0A", "U0A"], "required": 3},
        {"targets": ["a"], "operations": ["restore"], "approvers": ["@sre"], "required": 3},  # needs Slack
        {"targets": ["all"], "operations": ["verify"], "approvers": []},  # nothing to approve
    ]
    path = write_inventory(tmp_path / "i.yml", document)
    run = await run_cli("inventory", "check", "--inventory", str(path))
    assert run.code == 2
    assert "policies[0]: no approvers: nothing it covers can ever be approved" in run.stderr
    assert "policies[1]: required: 3 but only 1 distinct approver(s) named" in run.stderr
    assert "policies[2]" not in run.stderr and "policies[3]" not in run.stderr
    document["policies"] = document["policies"][2:]
    run = await run_cli("inventory", "check", "--inventory", str(write_inventory(tmp_path / "i.yml", document)))
    assert run.code == 0, run.stderr
    assert "user groups @sre: members not checked (needs Slack: the App Home shows them)" in run.stdout


class Groups:
    """A Slack stand-in for the resolver alone (the bot's own path: a real serve, test_slack_policy_serve)."""

    def __init__(self, **members: list[str]) -> None:
        self.members = {name: frozenset(users) for name, users in members.items()}
        self.asked = 0
        self.now = 0.0
        self.down = False

    async def fetch(self, handle: str) -> frozenset[str]:
        self.asked += 1
        if self.down:
            raise CouldNotCheck("Slack answered 'ratelimited'")
        return self.members[handle]

    def cache(self) -> GroupCache:
        return GroupCache(ttl_s=60, clock=lambda: self.now)


async def plan_store(tmp_path: Path) -> AuditStore:
    store = AuditStore.open(tmp_path / "a.db")
    await approvals.create(store, plan_id="op-1", operation="restart", host="a", requested_by="slack:U0REQ",
                           plan_hash="h1", details={}, approvals=Approvals())
    return store


async def votes(store: AuditStore) -> list[dict[str, Any]]:
    found = await store.read(lambda conn: conn.execute(
        "SELECT actor, details FROM events WHERE kind IN ('vote', 'approved', 'rejected') ORDER BY id").fetchall())
    return [{"actor": actor, **json.loads(details)} for actor, details in found]


async def test_two_approvals_required_the_first_does_not_apply_and_one_person_counts_once(tmp_path: Path) -> None:
    groups = Groups(**{"sre-oncall": ["U0AAA", "U0BBB", "U0REQ"]})
    rule = await resolve(inventory().policy("restart", ["a"]), groups.cache(), groups.fetch)
    assert rule.via["U0AAA"] == ("@sre-oncall", "U0AAA")  # named twice: one person
    store = await plan_store(tmp_path)
    first = await approvals.decide(store, "op-1", "slack:U0AAA", "approved", rule, user_id="U0AAA")
    assert first.state == "pending"  # counted, not applied
    assert await approvals.approval_count(store, "op-1", rule) == ("U0AAA",)
    with pytest.raises(Refused, match="already counted"):  # again (by id or through the group): once
        await approvals.decide(store, "op-1", "slack:U0AAA", "approved", rule, user_id="U0AAA")
    with pytest.raises(Refused, match="you requested this plan"):  # the requester, inside the group
        await approvals.decide(store, "op-1", "slack:U0REQ", "approved", rule, user_id="U0REQ")
    with pytest.raises(Refused, match="not an approver"):
        await approvals.decide(store, "op-1", "slack:U0ZZZ", "approved", rule, user_id="U0ZZZ")
    assert (await approvals.get(store, "op-1")).state == "pending"
    second = await approvals.decide(store, "op-1", "slack:U0BBB", "approved", rule, user_id="U0BBB")
    assert (second.state, second.decided_by) == ("approved", "slack:U0BBB")
    logged = await votes(store)
    assert [(v["actor"], v.get("counted"), v.get("why", "")[:22]) for v in logged] == [
        ("slack:U0AAA", True, ""), ("slack:U0AAA", False, "your approval of this "),
        ("slack:U0REQ", False, "you requested this pla"), ("slack:U0ZZZ", False, "you are not an approve"),
        ("slack:U0BBB", None, "")]
    assert logged[-1]["approvals"] == ["U0AAA", "U0BBB"]
    assert logged[-1]["policy"]["index"] == 0 and "required: 2" in logged[-1]["policy"]["text"]
    store.close()


async def test_a_member_removed_stops_counting_at_the_refresh_and_slack_down_refuses(tmp_path: Path) -> None:
    groups = Groups(**{"sre-oncall": ["U0BBB", "U0CCC"]})
    cache = groups.cache()
    applied = inventory().policy("restart", ["a"])
    store = await plan_store(tmp_path)
    rule = await resolve(applied, cache, groups.fetch)
    await approvals.decide(store, "op-1", "slack:U0BBB", "approved", rule, user_id="U0BBB")
    groups.members["sre-oncall"] = frozenset({"U0CCC"})  # U0BBB leaves the group
    assert (await resolve(applied, cache, groups.fetch)).approvers >= {"U0BBB"}  # the cache still holds them
    groups.now = 61
    rule = await resolve(applied, cache, groups.fetch)
    assert "U0BBB" not in rule.approvers and groups.asked == 2
    decided = await approvals.decide(store, "op-1", "slack:U0CCC", "approved", rule, user_id="U0CCC")
    assert decided.state == "pending"  # U0BBB's earlier approval no longer counts
    assert await approvals.approval_count(store, "op-1", rule) == ("U0CCC",)
    groups.down, groups.now = True, 200
    with pytest.raises(Refused, match="could not resolve the approver group @sre-oncall"):
        await resolve(applied, cache, groups.fetch)
    with pytest.raises(Refused, match="only the Slack bot can resolve"):
        await resolve(applied, None, None)
    assert (await approvals.get(store, "op-1")).state == "pending"
    store.close()


async def test_a_reject_by_any_one_approver_ends_the_plan(tmp_path: Path) -> None:
    groups = Groups(**{"sre-oncall": ["U0BBB"]})
    rule = await resolve(inventory().policy("restart", ["a"]), groups.cache(), groups.fetch)
    store = await plan_store(tmp_path)
    await approvals.decide(store, "op-1", "slack:U0BBB", "approved", rule, user_id="U0BBB")
    rejected = await approvals.decide(store, "op-1", "slack:U0AAA", "rejected", rule, user_id="U0AAA",
                                      reason="not now")
    assert rejected.state == "rejected"
    with pytest.raises(Refused, match="already rejected"):
        await approvals.decide(store, "op-1", "slack:U0AAA", "approved", rule, user_id="U0AAA")
    assert (await votes(store))[-1]["policy"]["index"] == 0
    store.close()


def test_the_flat_approvals_rule_is_the_one_flat_list() -> None:
    rule = Rule.of_approvals(Approvals(approvers=["U2"], allow_self_approval=True))
    assert (rule.approvers, rule.required, rule.applied.allow_self_approval) == (frozenset({"U2"}), 1, True)


async def test_a_plan_only_policy_makes_the_cli_print_the_plan_and_the_slack_command(tmp_path: Path) -> None:
    """`cli: plan-only`: restore and restart on those hosts print the plan and how to ask in Slack, exit 4,
    nothing changed on the host (a loopback lab host under a real supervisord); other hosts are unchanged."""
    from bot.demo.host import demo_host
    from tests.test_restore_loopback import restore_cli, tree

    async with demo_host("ct129") as host:
        document = host.inventory()
        document["groups"] = {"prod": ["ct129"]}
        document["policies"] = [{"targets": ["prod"], "operations": ["restore", "restart"], "required": 2,
                                 "approvers": ["U0AAA", "U0BBB"], "cli": "plan-only"}]
        before = tree(host.root)
        pid = (await host.supervisorctl("pid", "sglang")).strip()
        run = await restore_cli(host, tmp_path, "--yes", document=document)
        assert run.code == 4, run.stdout + run.stderr
        assert "Restore plan for ct129" in run.stdout
        assert "policy 0 of the inventory is plan-only for the CLI" in run.stderr
        assert "request it in Slack: /restore ct129 pre-ddtree" in run.stderr
        restart = await run_cli("restart", "prod", "--yes", "--inventory", str(tmp_path / "inv.yml"),
                                "--db", str(tmp_path / "a.db"))
        assert restart.code == 4 and "request it in Slack: /restart prod" in restart.stderr, restart.stderr
        assert tree(host.root) == before and (await host.supervisorctl("pid", "sglang")).strip() == pid
        kinds = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute(
            "SELECT kind FROM events WHERE kind IN ('approved', 'refused') ORDER BY id")]
        assert kinds == ["refused", "refused"]  # each plan withdrawn, never approved


def test_the_readme_policies_example_loads_with_its_one_host() -> None:
    import re

    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    one_host = re.search(r"## One host\n.*?```yaml\n(.*?)```", readme, re.S)
    policies = re.search(r"## Policies\n.*?```yaml\n(.*?)```", readme, re.S)
    assert one_host is not None and policies is not None
    inv = parse_inventory(one_host.group(1) + policies.group(1), "README.md")
    assert [p.required for p in inv.policies] == [2, 1, 1, 1] and inv.policy("restart", ["ct129"]).index == 1
    assert inv.policies[2].cli == "plan-only" and inv.policy("verify", ["ct129"]).policy.channels == ["C0OPS", "C0PROD"]
    assert inv.approvals.group_ttl_s == 60


async def test_a_rolling_restart_over_mixed_policies_takes_the_strictest_hosts_channel_rule(tmp_path: Path) -> None:
    """`/restart all` over a (prod: two approvals, only in C0PROD) and b (the flat approvals, anywhere): the
    request is judged by a's policy, refused from another channel before anything is recorded."""
    from commands.operation import Origin
    from commands.plans import admit
    from commands.restart.rollout import rollout_request

    inv = inventory(approvals={"approvers": ["U0OLD"]})
    store = AuditStore.open(tmp_path / "a.db")
    request = rollout_request(inv, "all")
    with pytest.raises(Refused, match="rollout on all is taken only in C0PROD"):
        await admit(store, request, inventory=inv, origin=Origin("slack:U0REQ", "slack", "C0OPS"))
    assert await admit(store, request, inventory=inv, origin=Origin("slack:U0REQ", "slack", "C0PROD")) == request
    only_b = rollout_request(inventory(approvals={"approvers": ["U0OLD"]}, groups={"prod": ["a"], "rest": ["b"]}),
                             "rest")
    assert await admit(store, only_b, inventory=inv, origin=Origin("slack:U0REQ", "slack", "C0OPS")) == only_b
    assert await store.read(lambda conn: conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]) == 0
    store.close()
