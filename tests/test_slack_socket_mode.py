"""Socket Mode end to end: a slash command and a button click reach the real bolt app over the socket,
each envelope is acked in time and without a body Slack would ignore, and the click does its work."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import yaml
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from bot.demo.host import demo_host
from bot.slack.app import BotContext, build_app
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.slack_fake.records import Message
from tests.slack_fake.server import FakeSlack

CHANNEL = "C0OPS"
REQUESTER, APPROVER = "U0REQ", "U0APPROVER"


def click(slack: FakeSlack, message: Message, action_id: str, user: str) -> dict[str, Any]:
    """The block_actions payload Slack sends when `user` clicks the button `action_id` on `message`."""
    [button] = [e for b in message.blocks or [] if b["type"] == "actions" for e in b["elements"]
                if e["action_id"] == action_id]
    return {"type": "block_actions", "user": {"id": user, "username": user}, "api_app_id": "A0PROOF",
            "token": "verification", "trigger_id": slack.trigger_id(user), "team": {"id": "T0TEST"},
            "container": {"type": "message", "message_ts": message.ts, "channel_id": CHANNEL},
            "channel": {"id": CHANNEL}, "message": {"ts": message.ts, "text": message.text},
            "response_url": slack.response_url(),
            "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": button["value"],
                         "action_ts": str(time.time())}]}


def plan_message(slack: FakeSlack) -> Message | None:
    return next((m for m in slack.messages_in(CHANNEL)
                 if not m.is_reply and any(b["type"] == "actions" for b in m.blocks or [])), None)


async def test_a_restore_approved_by_a_click_over_socket_mode(tmp_path: Path) -> None:
    async with demo_host("ct129") as host:
        document = host.inventory()
        document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False}
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
            context = BotContext(inventory, audit)
            app = build_app(context, bot_token=slack.bot_token, api_url=slack.api_url)
            handler = AsyncSocketModeHandler(app, slack.app_token, web_client=app.client)
            await handler.connect_async()  # type: ignore[no-untyped-call]
            try:
                # Each envelope's ack is judged by the fake as Slack would (in time, a body it can show).
                await (await slack.socket_send_slash_command("/restore", "ct129", channel_id=CHANNEL,
                                                             user_id=REQUESTER)).wait()
                await slack.wait_until(lambda: plan_message(slack) is not None, timeout=20, what="the plan")
                plan = plan_message(slack)
                assert plan is not None
                ack = await (await slack.socket_send_interaction(click(slack, plan, "restore_approve",
                                                                       APPROVER))).wait()
                assert ack.payload is None  # a click's ack carries nothing
                await slack.wait_until(lambda: any("restore: PASS" in e.text
                                                   for e in slack.message(CHANNEL, plan.ts).edits),
                                       timeout=30, what="the restore's verdict")
                assert host.live_dir.joinpath("spec_info.py").read_bytes() == host.backup_dir.joinpath(
                    "spec_info.py").read_bytes()
                assert "approved by <@U0APPROVER>" in json.dumps(slack.message(CHANNEL, plan.ts).edits[-1].blocks)
            finally:
                await handler.close_async()  # type: ignore[no-untyped-call]
                timers = list(context.timers)
                for timer in timers:
                    timer.cancel()
                await asyncio.gather(*timers, return_exceptions=True)  # ended before the store closes
                audit.close()
