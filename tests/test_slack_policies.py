"""Policies through the real bolt app (issue 24): a two-person rule with a Slack user group, against a loopback
lab host and the fake Slack (``usergroups.list`` / ``usergroups.users.list``): a channel rule refusing a request,
the requester inside the group refused, the first approval counted and shown but not applied, the same person
again refused, a member removed from the group no longer counting after the refresh, Slack failing while
resolving refusing the click, and the second approval applying the restore, audited with its policy."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

from bot.demo.host import demo_host
from bot.slack.app import BotContext, build_app
from commands.approvers import GroupCache
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.lab.waits import until
from tests.slack_fake.records import Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import block_actions_body, slash_command_body
from tests.test_slack_restore import APPROVER, CHANNEL, OTHER_APPROVER, REQUESTER, SECRET, Rig, is_final

ELSEWHERE = "C0ELSE"
ONE_MORE = "U0THIRD"


class Clock:
    now = 0.0


class PolicyRig(Rig):
    clock: Clock
    context: BotContext

    async def answer(self, message: Message, user: str) -> str:
        """Approve as Slack sends it (the message's blocks with it); the ephemeral answer, or "" when none."""
        response_url = self.slack.response_url()
        payload: dict[str, Any] = {
            "type": "block_actions", "user": {"id": user, "username": user}, "api_app_id": "A0PROOF",
            "token": "verification", "trigger_id": self.slack.trigger_id(user), "team": {"id": "T0TEST"},
            "container": {"type": "message", "message_ts": message.ts, "channel_id": CHANNEL},
            "channel": {"id": CHANNEL}, "response_url": response_url,
            "message": {"ts": message.ts, "text": message.text, "blocks": message.blocks},
            "actions": [{"type": "button", "action_id": "restore_approve", "block_id": "b",
                         "value": self.plan_id(message), "action_ts": str(time.time())}],
        }
        replies = len(self.slack.thread(CHANNEL, message.ts))
        assert (await self.post(block_actions_body(payload))).status_code == 200
        await self.slack.wait_until(lambda: bool(self.slack.responses_to(response_url))
                                    or len(self.slack.thread(CHANNEL, message.ts)) > replies
                                    or is_final(self.slack.message(CHANNEL, message.ts)),
                                    timeout=30, what="an answer to the click")
        answered = self.slack.responses_to(response_url)
        return str(answered[0].body["text"]) if answered else ""

    @staticmethod
    def plan_id(message: Message) -> str:
        return str(next(b for b in message.blocks or [] if b["type"] == "actions")["elements"][0]["value"])


@pytest_asyncio.fixture(loop_scope="session")
async def rig(tmp_path: Path) -> AsyncIterator[PolicyRig]:
    async with demo_host("ct129") as host:
        document = host.inventory()
        document["groups"] = {"prod": ["ct129"]}
        document["approvals"] = {"approvers": [REQUESTER], "expire_after_s": 900}  # not what rules ct129
        document["policies"] = [
            {"targets": ["prod"], "operations": ["restart", "restore"], "required": 2, "channels": [CHANNEL],
             "approvers": ["@sre-oncall", APPROVER]},
            {"targets": ["all"], "operations": ["verify"], "approvers": ["@nobody-here", "@ghost"],
             "channels": [CHANNEL]},
        ]
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        clock = Clock()
        async with FakeSlack(channels={CHANNEL: "ops", ELSEWHERE: "elsewhere"}, signing_secret=SECRET) as slack:
            slack.add_usergroup("sre-oncall", APPROVER, OTHER_APPROVER, REQUESTER, ONE_MORE)
            slack.add_usergroup("nobody-here")
            slack.join(CHANNEL, APPROVER)
            context = BotContext(inventory, audit, groups=GroupCache(ttl_s=60, clock=lambda: clock.now))
            app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
            try:
                async with serving(app) as url:
                    made = PolicyRig(slack, url, tmp_path / "audit.db", host)
                    made.clock, made.context = clock, context
                    yield made
            finally:
                # stopped before the store closes; a Home handler still finishing may start the refresher
                # again just after (bolt runs handlers after their ack): stop it too
                for _ in range(50):
                    timers = list(context.timers)
                    for timer in timers:
                        timer.cancel()
                    await asyncio.gather(*timers, return_exceptions=True)
                    await asyncio.sleep(0.02)
                    if not context.timers:
                        break
                audit.close()


async def test_two_person_rule_with_a_user_group(rig: PolicyRig) -> None:
    live = rig.host.live_dir.joinpath("spec_info.py")
    before = live.read_bytes()
    # a channel rule: the request from another channel is refused, nothing planned
    response_url = rig.slack.response_url()
    refused = await rig.post(slash_command_body("/restore", "ct129", REQUESTER, ELSEWHERE, response_url, "t1"))
    assert "restore on ct129 is taken only in C0OPS" in refused.json()["text"]  # the answer, before anything
    assert rig.slack.messages_in(ELSEWHERE) == [] and rig.events("plan-shown") == []
    verify = await rig.post(slash_command_body("/verify", "ct129", REQUESTER, ELSEWHERE, response_url, "t2"))
    assert "verify on ct129 is taken only in C0OPS" in verify.json()["text"]  # a verify too: no plan, same rule
    assert rig.slack.messages_in(ELSEWHERE) == [] and rig.events("requested") == []

    assert (await rig.restore()).status_code == 200
    plan = await rig.restore_plan_message()
    assert "approvers: 2 of `@sre-oncall`, <@U0APPROVER>" in json.dumps(plan.blocks)  # the policy's, not `approvals`
    assert "another approver must approve" in await rig.answer(plan, REQUESTER)  # in the group, still the requester
    assert await rig.answer(plan, APPROVER) == ""  # counted (named by id and through the group: once)
    assert rig.slack.thread(CHANNEL, plan.ts)[-1].text.endswith("1 of 2 approvals: <@U0APPROVER>")
    shown = rig.slack.message(CHANNEL, plan.ts)
    assert "1 of 2 approvals: <@U0APPROVER>" in json.dumps(shown.blocks)
    assert any(b["type"] == "actions" for b in shown.blocks or [])  # still awaiting the second approval
    assert "already counted" in await rig.answer(shown, APPROVER)
    assert live.read_bytes() == before

    # OTHER_APPROVER leaves the group: still counted until the cache refreshes, then not an approver
    group_id = next(iter(rig.slack.usergroups))
    rig.slack.set_usergroup_users(group_id, REQUESTER, ONE_MORE)
    rig.clock.now += 61
    assert "not an approver" in await rig.answer(shown, OTHER_APPROVER)
    # Slack failing while resolving the group refuses the click (never falls open)
    rig.slack.scopes.discard("usergroups:read")
    rig.clock.now += 61
    assert "could not resolve the approver group @sre-oncall" in await rig.answer(shown, ONE_MORE)
    assert live.read_bytes() == before and rig.events("approved") == []

    rig.slack.scopes.add("usergroups:read")
    await rig.answer(shown, ONE_MORE)  # the second distinct approval: applied
    await rig.slack.wait_until(lambda: is_final(rig.slack.message(CHANNEL, plan.ts)), timeout=30, what="verdict")
    assert "restore: PASS" in rig.slack.message(CHANNEL, plan.ts).edits[-1].text
    assert live.read_bytes() == rig.host.backup_dir.joinpath("spec_info.py").read_bytes()
    (approved,) = rig.events("approved")
    assert approved["approvals"] == [APPROVER, ONE_MORE] and approved["policy"]["index"] == 0
    votes = rig.events("vote")
    assert [(v["user"], v["counted"]) for v in votes] == [
        (REQUESTER, False), (APPROVER, True), (APPROVER, False), (OTHER_APPROVER, False)]
    assert all("required: 2" in v["policy"]["text"] for v in votes)
    assert rig.slack.warnings == []


async def test_the_app_home_says_who_may_do_what_where(rig: PolicyRig) -> None:
    published = len(rig.slack.calls_to("views.publish"))
    ack = await rig.slack.deliver_event(rig.url, {"type": "app_home_opened", "user": APPROVER, "tab": "home",
                                                  "channel": "D0HOME"})
    assert ack.status_code == 200
    await rig.slack.wait_for("views.publish", published + 1)
    await until("the Home refresher (stopped at teardown)", lambda: rig.context.timers)
    view = rig.slack.home_of(APPROVER)
    assert view is not None
    lines = [b["text"]["text"] for b in view["blocks"] if b["type"] == "section" and "·" in b["text"]["text"]]
    assert lines[-3:] == [
        "*0* · prod · restart, restore · 2 of `@sre-oncall` (4 members), <@U0APPROVER> · from <#C0OPS>",
        "*1* · all · verify · 1 of `@nobody-here` (no members: never satisfied), `@ghost` (not checked: Slack "
        "has no enabled user group @ghost) · from <#C0OPS>",
        "*2* (implicit) · all · verify, restore, restart, ping · 1 of <@U0REQ> · from any channel"]
    # a viewer outside the policy's channel sees it counted, never named
    ack = await rig.slack.deliver_event(rig.url, {"type": "app_home_opened", "user": ONE_MORE, "tab": "home",
                                                  "channel": "D0HOME"})
    assert ack.status_code == 200
    await rig.slack.wait_for("views.publish", published + 2)
    await until("the Home refresher (stopped at teardown)", lambda: rig.context.timers)
    outside = json.dumps((rig.slack.home_of(ONE_MORE) or {})["blocks"])
    assert "from 1 channel(s) you are not in" in outside and CHANNEL not in outside
