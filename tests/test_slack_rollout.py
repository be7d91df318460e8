"""/restart GROUP through the real bolt app over three loopback hosts (each its own supervisord): one plan
with every host's PID, one approval, progress on the parent, one reply per host, the summary; and the plan
rendered for 500 hosts inside Block Kit's limits (the fake Slack's validator)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from bot.demo.host import DemoHost, demo_host
from bot.slack.app import BotContext, build_app
from bot.slack.rollout_blocks import rollout_plan_message, rollout_result_message, rollout_status_message
from commands.inventory import parse_inventory
from commands.restart.plan import RestartPlan, ServiceSnapshot
from commands.restart.rollout import HostOutcome, RolloutPlan, RolloutResult
from commands.store.db import AuditStore
from tests.slack_fake.blockkit import validate_blocks
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.test_slack_restore import APPROVER, CHANNEL, REQUESTER, SECRET, Rig

NAMES = ["ct129", "ct130", "ct131"]


def _entry(host: DemoHost) -> dict[str, Any]:
    entry: dict[str, Any] = host.inventory()["hosts"][host.name]
    entry["ssh"] = {"known_hosts": str(host.known_hosts), "client_keys": [str(host.client_key)]}
    return entry


async def _pid(host: DemoHost) -> int:
    return int((await host.supervisorctl("pid", "sglang")).strip())


async def _stop_timers(context: BotContext) -> None:
    timers = list(context.timers)
    for timer in timers:
        timer.cancel()
    await asyncio.gather(*timers, return_exceptions=True)


@asynccontextmanager
async def rollout_rig(tmp_path: Path, names: list[str], expire_after_s: float = 900) -> AsyncIterator[
        tuple[Rig, list[DemoHost]]]:
    """The real bolt app over loopback hosts (each its own supervisord), grouped as gpu-west."""
    async with AsyncExitStack() as stack:
        hosts = [await stack.enter_async_context(demo_host(name, flags=["--speculative-algorithm", "NEXTN"]))
                 for name in names]
        document = hosts[0].inventory()
        document["hosts"] = {host.name: _entry(host) for host in hosts}
        document["groups"] = {"gpu-west": names}
        document["fleet"] = {"restart_batch": 1}
        document["approvals"] = {"approvers": [APPROVER, REQUESTER], "allow_self_approval": False,
                                 "expire_after_s": expire_after_s}
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        stack.callback(audit.close)
        slack = await stack.enter_async_context(FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET))
        context = BotContext(inventory, audit)
        app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
        url = await stack.enter_async_context(serving(app))
        stack.push_async_callback(_stop_timers, context)  # first out: awaited, before the store closes
        yield Rig(slack, url, tmp_path / "audit.db", hosts[0]), hosts


async def test_rolling_restart_in_slack_one_approval_progress_and_one_reply_per_host(tmp_path: Path) -> None:
    async with rollout_rig(tmp_path, NAMES) as (rig, hosts):
        slack = rig.slack
        before = {host.name: await _pid(host) for host in hosts}

        assert (await rig.command("/restart", "gpu-west")).status_code == 200
        plan = await rig.restore_plan_message()
        shown = json.dumps(plan.blocks)
        assert "Rolling restart plan for gpu-west" in plan.text + shown and "3 hosts, 1 at a time" in shown
        for name, pid in before.items():
            assert f"`{name}` {pid}" in shown
        assert "--speculative-algorithm NEXTN" in shown
        assert [m for m in slack.messages_in(CHANNEL) if m.is_reply] == []  # 3 hosts: no file, no replies yet

        response, _ = await rig.click(plan, "rollout_approve", APPROVER)
        assert response.status_code == 200
        await slack.wait_until(lambda: "restart gpu-west: PASS" in slack.message(CHANNEL, plan.ts).text,
                               timeout=120, what="the rollout's summary on the parent")
        after = {host.name: await _pid(host) for host in hosts}
        assert all(after[name] != before[name] for name in NAMES), (before, after)
        parent = slack.message(CHANNEL, plan.ts)
        assert "done 3, failed 0, untouched 0" in parent.text
        progress = [edit.text for edit in parent.edits if " restarted" in edit.text and "PASS" not in edit.text]
        assert any(f"/{len(NAMES)} restarted" in text for text in progress), [e.text for e in parent.edits]
        # the verdict is on the parent when the rollout ends; its replies may still be on their way
        await slack.wait_until(lambda: len(slack.thread(CHANNEL, plan.ts)) >= len(NAMES), what="a reply per host")
        replies = slack.thread(CHANNEL, plan.ts)
        assert [reply.text.split(" ", 1)[0] for reply in replies] == NAMES  # one reply per host, in order
        for reply, name in zip(replies, NAMES, strict=True):
            assert reply.text.startswith(f"{name} restart: PASS")
            assert f"{before[name]} → {after[name]}" in json.dumps(reply.blocks, ensure_ascii=False)
        with sqlite3.connect(tmp_path / "audit.db") as db:
            approved = db.execute("SELECT operation_id, operation FROM events WHERE kind = 'approved'").fetchall()
            linked = db.execute("SELECT host FROM events WHERE kind = 'requested' AND operation = 'restart' AND "
                                "json_extract(details, '$.fleet_operation_id') = ?", [approved[0][0]]).fetchall()
            assert db.execute("SELECT COUNT(*) FROM locks").fetchone() == (0,)
        assert approved == [(approved[0][0], "rollout")]  # one approval for the group
        assert sorted(row[0] for row in linked) == NAMES
        assert slack.warnings == []


async def test_self_approval_is_refused_and_a_rejection_restarts_nothing(tmp_path: Path) -> None:
    async with rollout_rig(tmp_path, NAMES[:2]) as (rig, hosts):
        before = [await _pid(host) for host in hosts]
        assert (await rig.command("/restart", "gpu-west")).status_code == 200
        plan = await rig.restore_plan_message()
        _, own_url = await rig.click(plan, "rollout_approve", REQUESTER)
        await rig.slack.wait_until(lambda: bool(rig.slack.responses_to(own_url)), what="the refusal")
        assert "another approver must approve it" in rig.slack.responses_to(own_url)[0].body["text"]
        await rig.reject(plan, "rollout_reject", APPROVER, "not during the launch")
        await rig.slack.wait_until(lambda: "rejected by" in json.dumps(rig.slack.message(CHANNEL, plan.ts).blocks),
                                   timeout=20, what="the rejection on the plan")
        final = rig.slack.message(CHANNEL, plan.ts)
        assert "nothing was restarted" in json.dumps(final.blocks)
        assert "not during the launch" in json.dumps(final.blocks)  # the reason, on the plan
        assert not any(block["type"] == "actions" for block in final.blocks or [])
        assert [await _pid(host) for host in hosts] == before
        assert rig.events("approved") == [] and [e["verdict"] for e in rig.events("finished")] == ["rejected"]


async def test_an_undecided_rollout_plan_expires_and_loses_its_buttons(tmp_path: Path) -> None:
    async with rollout_rig(tmp_path, NAMES[:2], expire_after_s=3) as (rig, hosts):
        before = [await _pid(host) for host in hosts]
        assert (await rig.command("/restart", "gpu-west")).status_code == 200
        plan = await rig.restore_plan_message()
        await rig.slack.wait_until(lambda: "expired at" in json.dumps(rig.slack.message(CHANNEL, plan.ts).blocks),
                                   timeout=30, what="the plan marked expired")
        final = rig.slack.message(CHANNEL, plan.ts)
        assert not any(block["type"] == "actions" for block in final.blocks or [])
        assert [await _pid(host) for host in hosts] == before
        assert [e["verdict"] for e in rig.events("finished")] == ["expired"]


def _plan(count: int, *, same_cmdline: bool, tmp_path: Path) -> RolloutPlan:
    known = tmp_path / "known_hosts"
    known.write_text("")
    names = [f"gpu-west-{i:03d}" for i in range(count)]
    service = {"manager": "supervisord", "unit": "sglang", "health_url": "http://127.0.0.1:30000/health"}
    document = {"ssh": {"user": "root", "known_hosts": str(known), "client_keys": []},
                "groups": {"gpu-west": names},
                "hosts": {name: {"address": f"10.1.{i // 200}.{i % 200 + 1}", "service": service}
                          for i, name in enumerate(names)}}
    inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
    plans = []
    for i, name in enumerate(names):
        flags = "" if same_cmdline else f" --port {30000 + i} --served-model-name model-{i}"
        snapshot = ServiceSnapshot(100000 + i, True, "RUNNING",
                                   cmdline="python3 -m sglang.launch_server --model /models/qwen3 "
                                           f"--speculative-algorithm NEXTN --tp 8{flags}")
        plans.append(RestartPlan(f"op-host-{i}", inventory.hosts[name], snapshot))
    return RolloutPlan("op-rollout", "gpu-west", 1, tuple(plans))


def _sections(blocks: list[dict[str, Any]]) -> list[str]:
    return [block["text"]["text"] for block in blocks if block["type"] == "section"]


def test_a_500_host_plan_and_its_summary_stay_inside_block_kit(tmp_path: Path) -> None:
    for same in (True, False):
        plan = _plan(500, same_cmdline=same, tmp_path=tmp_path)
        text, blocks = rollout_plan_message(plan, "U0REQ", "2026-12-01T00:00:00Z", ["U0APPROVER"])
        assert validate_blocks(blocks) == [], same
        assert len(blocks) <= 50 and all(len(s) <= 3000 for s in _sections(blocks))
        listed = "\n".join(_sections(blocks))
        assert "`gpu-west-000` 100000" in listed and "500 hosts, 1 at a time" in listed
        # One command line: one heading for all 500; 500 different ones: a heading each, as many as fit.
        assert ("*500 hosts* · `sglang` (supervisord)" in listed) is same
        assert "gpu-west-499" not in listed
        shown = listed.count("`gpu-west-")
        assert shown >= (400 if same else 40), shown
        assert f"… {500 - shown} more hosts: every host's PID and cmdline are in the attached plan" in listed
        assert any(b["type"] == "actions" for b in blocks) and "approval needed" in text
        _, status = rollout_status_message(plan, "U0REQ", "approved", "250/500 restarted · restarting gpu-west-250")
        assert validate_blocks(status) == []
    outcomes = [HostOutcome(p.host.name, "done") for p in plan.hosts[:250]]
    outcomes += [HostOutcome(plan.hosts[250].host.name, "failed", reason="main-pid: crash loop")]
    outcomes += [HostOutcome(p.host.name, "untouched", reason="not reached") for p in plan.hosts[251:]]
    result = RolloutResult("op-rollout", "gpu-west", "2026-12-01T00:00:00Z", 1234.5, outcomes,
                           "halted after batch 251 of 500: gpu-west-250 failed its proof")
    text, blocks = rollout_result_message(plan, "U0REQ", "approved", result)
    assert validate_blocks(blocks) == [] and len(blocks) <= 50
    assert "done 250, failed 1, untouched 249" in text
    summary = "\n".join(_sections(blocks))
    assert "failed (1): gpu-west-250" in summary and "untouched (249): gpu-west-[251-499]" in summary
