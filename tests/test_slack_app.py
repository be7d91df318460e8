"""The real bolt app receiving signed slash commands over HTTP (and once over Socket Mode),
talking to the recording fake of the Slack Web API."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from bot.demo.host import DemoHost
from bot.slack import pace
from bot.slack.app import BotContext, build_app
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.slack_fake.records import HttpAck
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import FORM_CONTENT_TYPE, sign, slash_command_body

SECRET = "test-signing-secret"
CHANNEL = "C0OPS"
INVITED = {CHANNEL: "ops"}  # the only channel the bot was invited to
USER = "U0ALICE"
MANIFEST = Path(__file__).resolve().parent.parent / "manifest.yml"


@dataclass
class SlackRig:
    slack: FakeSlack
    url: str
    db: Path

    async def command(self, command: str, text: str, *, channel: str = CHANNEL,
                      user: str = USER) -> tuple[HttpAck, str, float]:
        """Slack delivers the slash command (signed) and judges the ack."""
        response_url = self.slack.response_url()
        body = slash_command_body(command, text, user, channel, response_url, "trigger-1")
        ack = await self.slack.deliver(self.url, body)
        return ack, response_url, ack.elapsed

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        rows = sqlite3.connect(self.db).execute("SELECT kind, details FROM events ORDER BY id").fetchall()
        return [(kind, json.loads(details)) for kind, details in rows]


@pytest_asyncio.fixture(loop_scope="session")
async def rig(seeded_host: DemoHost, tmp_path: Path) -> AsyncIterator[SlackRig]:
    document = seeded_host.inventory()
    document["channels"] = [CHANNEL]
    inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels=INVITED, signing_secret=SECRET) as slack:
        slack.add_channel("C0RANDOM", "random", member=False)
        app = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, signing_secret=SECRET,
                        api_url=slack.api_url)
        try:
            async with serving(app) as url:
                yield SlackRig(slack, url, tmp_path / "audit.db")
        finally:
            audit.close()


async def test_verify_posts_parent_threads_evidence_and_ends_with_verdict(rig: SlackRig) -> None:
    response, _, _ = await rig.command("/verify", "ct129")
    assert response.status_code == 200
    slack = rig.slack
    await slack.wait_until(lambda: any(m.edits and "FAIL" in m.edits[-1].text
                                       for m in slack.messages_in(CHANNEL) if not m.is_reply),
                           timeout=30, what="the verdict on the parent")
    [parent] = [m for m in slack.messages_in(CHANNEL) if not m.is_reply]
    first_post = slack.calls_to("chat.postMessage")[0].args
    assert first_post["text"].startswith("Verifying ct129 for <@U0ALICE>")
    assert "thread_ts" not in first_post
    await slack.wait_until(lambda: any(m.text.startswith("Summary of operation")
                                       for m in slack.thread(CHANNEL, parent.ts)), what="the summary reply")
    *replies, summary = slack.thread(CHANNEL, parent.ts)
    assert len(replies) == 8  # 7 host facts and the probe (one real request)
    summary_text = json.dumps(summary.blocks)
    assert "requested by slack:U0ALICE" in summary_text and "finished: *fail*" in summary_text
    assert summary_text.count("`file:") == 2 and "`cmdline` fail" in summary_text
    assert all(reply.thread_ts == parent.ts for reply in replies)
    by_check = {reply.text.split(":")[0] + ":" + reply.text.split(":")[1] if reply.text.startswith("file:")
                else reply.text.split(":")[0]: reply for reply in replies}
    assert "fail" in by_check["cmdline"].text and "--enable-ddtree" in by_check["cmdline"].text
    assert by_check["probe"].text.startswith("probe: pass")
    code = json.dumps(by_check["file:spec_info.py"].blocks)
    assert "```$ sha256sum -- " in code
    final = parent.edits[-1]
    assert "ct129 verify: FAIL" in final.text
    assert "3 fail" in final.text
    assert slack.warnings == []
    requested = next(details for kind, details in rig.events() if kind == "requested")
    process = requested["origin"].pop("process")
    assert requested["origin"] == {"actor": "slack:U0ALICE", "via": "slack", "channel": CHANNEL,
                                   "thread_ts": parent.ts}
    assert process["pid"] == os.getpid() and process["machine"] == socket.gethostname()
    assert [kind for kind, _ in rig.events()].count("check") == 8


async def test_bad_signature_gets_401_and_no_web_api_call(rig: SlackRig) -> None:
    body = slash_command_body("/verify", "ct129", USER, CHANNEL, rig.slack.response_url(), "trigger-1")
    async with httpx.AsyncClient(trust_env=False) as client:  # not Slack: a forger
        response = await client.post(rig.url, content=body,
                                     headers={"Content-Type": FORM_CONTENT_TYPE, **sign(body, "wrong-secret")})
    assert response.status_code == 401
    assert rig.slack.calls == []


async def test_unknown_host_gets_ephemeral_list_and_runs_nothing(rig: SlackRig) -> None:
    response, _, _ = await rig.command("/verify", "ct129;reboot")
    assert response.status_code == 200
    reply = response.json()
    assert reply["response_type"] == "ephemeral"
    assert "unknown host" in reply["text"] and "known hosts: ct129" in reply["text"]
    assert rig.slack.calls_to("chat.postMessage") == []
    [(kind, details)] = rig.events()
    assert kind == "refused" and details["text"] == "ct129;reboot"


async def test_wrong_channel_is_refused(rig: SlackRig) -> None:
    response, _, _ = await rig.command("/verify", "ct129", channel="C0RANDOM")
    reply = response.json()
    assert reply["response_type"] == "ephemeral"
    assert "does not take commands in this channel" in reply["text"]
    assert f"&lt;#{CHANNEL}&gt;" not in reply["text"] and f"<#{CHANNEL}>" in reply["text"]
    assert rig.slack.calls_to("chat.postMessage") == []
    assert [kind for kind, _ in rig.events()] == ["refused"]


async def test_help_is_the_ack_itself(rig: SlackRig) -> None:
    response, _, _ = await rig.command("/verify", "help")
    assert response.status_code == 200
    assert "/verify HOST|GROUP... [BACKUP]" in response.json()["text"]
    assert "`ct129`" in response.json()["text"]
    assert rig.slack.calls_to("chat.postMessage") == []


async def test_every_manifest_command_is_handled_by_the_app(rig: SlackRig) -> None:
    commands = [entry["command"] for entry in yaml.safe_load(MANIFEST.read_text())["features"]["slash_commands"]]
    for command in commands:
        response, _, _ = await rig.command(command, "help")
        assert response.status_code == 200, f"{command} is in manifest.yml but the app does not handle it"
    unhandled, _, _ = await rig.command("/not-a-proofbot-command", "help")
    assert unhandled.status_code == 404
    assert "HTTP 404" in rig.slack.warnings.pop()  # Slack would tell the user the command failed
    assert rig.slack.warnings == []


@pytest.mark.parametrize("text", ["", "ct129 pre-ddtree extra-word"])
async def test_bad_usage_is_explained(rig: SlackRig, text: str) -> None:
    response, _, _ = await rig.command("/verify", text)
    assert response.status_code == 200
    assert "/verify HOST" in response.json()["text"] and "[BACKUP]" in response.json()["text"]
    assert rig.slack.calls_to("chat.postMessage") == []


async def test_socket_mode_acks_and_runs_verify(seeded_host: DemoHost, tmp_path: Path) -> None:
    inventory = parse_inventory(yaml.safe_dump(seeded_host.inventory()), "inventory.yml")
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels=INVITED) as slack:
        app = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, api_url=slack.api_url)
        handler = AsyncSocketModeHandler(app, slack.app_token, web_client=app.client)
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            await (await slack.socket_send_slash_command("/verify", "ct129", channel_id=CHANNEL)).wait()
            await slack.wait_until(lambda: any(m.edits and "verify: FAIL" in m.edits[-1].text
                                               for m in slack.messages_in(CHANNEL)), timeout=30, what="verdict")
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
            audit.close()


async def test_rate_limited_replies_are_retried_not_lost(rig: SlackRig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pace, "POST_BURST", 10)  # the outbox asks faster than this Slack takes: 429s come
    rig.slack.set_rate_limit("chat.postMessage", max_calls=3, per_seconds=1.0)
    await rig.command("/verify", "ct129")
    slack = rig.slack
    await slack.wait_until(lambda: any(m.text.startswith("Summary of operation") for m in slack.messages_in(CHANNEL)),
                           timeout=60, what="every reply despite 429s")
    assert any(not call.ok and call.error == "ratelimited" for call in slack.calls_to("chat.postMessage"))
    [parent] = [m for m in slack.messages_in(CHANNEL) if not m.is_reply]
    assert len(slack.thread(CHANNEL, parent.ts)) == 9  # 8 checks and the summary
