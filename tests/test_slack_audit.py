"""``/audit`` through the real bolt app (signed HTTP requests) against the recording fake Slack:
a parent message, one threaded reply per operation with a permalink to that operation's thread."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.app import BotContext, build_app
from bot.words import no_thread
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.audit_events import cli_origin, record_operation, slack_origin
from tests.slack_fake.records import HttpAck, Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import slash_command_body

SECRET = "test-signing-secret"
CHANNEL = "C0OPS"
USER = "U0ALICE"
INVENTORY = (f"channels: [{CHANNEL}]\nhosts:\n  ct129: {{address: 10.0.0.1}}\n  ct130: {{address: 10.0.0.2}}\n"
             "  ct131: {address: 10.0.0.3}\n")


@dataclass
class AuditRig:
    slack: FakeSlack
    url: str
    db: Path
    store: AuditStore
    threads: dict[str, str]  # operation id -> ts of its parent message in CHANNEL

    async def command(self, text: str, *, channel: str = CHANNEL) -> HttpAck:
        """Slack delivers /audit (signed) and judges the ack."""
        body = slash_command_body("/audit", text, USER, channel, self.slack.response_url(), "trigger-1")
        response = await self.slack.deliver(self.url, body)
        return response

    async def trail(self, replies: int) -> tuple[Message, list[Message]]:
        """The audit parent (the newest top-level message) once its replies are all posted."""
        def parent() -> Message | None:
            tops = [m for m in self.slack.messages_in(CHANNEL)
                    if not m.is_reply and m.text.startswith("Audit trail")]
            return tops[-1] if tops else None

        await self.slack.wait_until(
            lambda: (top := parent()) is not None and len(self.slack.thread(CHANNEL, top.ts)) >= replies,
            timeout=10, what=f"the audit parent and {replies} replies")
        top = parent()
        assert top is not None
        return top, self.slack.thread(CHANNEL, top.ts)

    def events(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        rows = sqlite3.connect(self.db).execute("SELECT kind, host, details FROM events ORDER BY id").fetchall()
        return [(kind, host, json.loads(details)) for kind, host, details in rows]


@pytest_asyncio.fixture(loop_scope="session")
async def rig(tmp_path: Path) -> AsyncIterator[AuditRig]:
    inventory = parse_inventory(INVENTORY, "inventory.yml")
    store = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        slack.add_channel("C0RANDOM", "random", member=False)
        # Operations that ran earlier: three from Slack (each with its own thread), one from the CLI.
        poster = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        threads: dict[str, str] = {}
        for op_id in ("op-1", "op-2", "op-4"):
            threads[op_id] = str((await poster.chat_postMessage(channel=CHANNEL, text=f"{op_id} ran here"))["ts"])
        await record_operation(store, "op-1", origin=slack_origin("U0ALICE", CHANNEL, threads["op-1"]), verdict="fail")
        await record_operation(store, "op-2", operation="restore", origin=slack_origin("U0CAROL", CHANNEL,
                                                                                        threads["op-2"]),
                               decision="approved", decided_by="slack:U0BOB")
        await record_operation(store, "op-3", origin=cli_origin("root@ops1"))
        await record_operation(store, "op-4", host="ct130", origin=slack_origin("U0DAVE", CHANNEL, threads["op-4"]))
        await record_operation(store, "op-5", origin=slack_origin("U0DAVE", CHANNEL, "999.000900"))  # thread gone
        slack.calls.clear()
        app = build_app(BotContext(inventory, store), bot_token=slack.bot_token, signing_secret=SECRET,
                        api_url=slack.api_url)
        try:
            async with serving(app) as url:
                yield AuditRig(slack, url, tmp_path / "audit.db", store, threads)
        finally:
            store.close()


async def test_audit_host_posts_parent_and_one_reply_per_operation_with_permalinks(rig: AuditRig) -> None:
    response = await rig.command("ct129 3")
    assert response.status_code == 200
    parent, replies = await rig.trail(3)
    assert parent.text == "Audit trail for ct129: last 3 operations"
    assert rig.slack.calls_to("chat.postMessage")[0].args.get("thread_ts") is None
    assert [reply.thread_ts for reply in replies] == [parent.ts] * 3
    newest, cli, restore = replies  # op-5, op-3, op-2: newest first
    assert "verify ct129: PASS" in newest.text and "op-5" in json.dumps(newest.blocks)
    assert "could not be linked: message_not_found" in newest.text
    assert no_thread("cli") == "(from the CLI, no thread)"
    assert no_thread("cli") in cli.text and "requested by root@ops1" in cli.text
    link = rig.slack.permalink(CHANNEL, rig.threads["op-2"])
    assert link in restore.text and f"<{link}|its thread>" in json.dumps(restore.blocks)
    assert "restore ct129: PASS" in restore.text
    assert "requested by <@U0CAROL> · approved by <@U0BOB>" in json.dumps(restore.blocks, ensure_ascii=False)
    asked = [call.args for call in rig.slack.calls_to("chat.getPermalink")]
    assert {(args["channel"], args["message_ts"]) for args in asked} == {(CHANNEL, rig.threads["op-2"]),
                                                                        (CHANNEL, "999.000900")}
    assert rig.slack.warnings == []
    kind, host, details = rig.events()[-1]
    assert (kind, host) == ("viewed", "ct129")
    assert {key: value for key, value in details["origin"].items() if key != "process"} == {
        "actor": f"slack:{USER}", "via": "slack", "channel": CHANNEL, "thread_ts": parent.ts}
    assert details["listed"] == ["op-5", "op-3", "op-2"]


async def test_audit_without_host_spans_hosts(rig: AuditRig) -> None:
    await rig.command("")
    parent, replies = await rig.trail(5)
    assert parent.text == "Audit trail across hosts: last 5 operations"
    assert [r.text.split(": ")[0].split("Z ", 1)[1] for r in replies] == [
        "verify ct129", "verify ct130", "verify ct129", "restore ct129", "verify ct129"]
    link = rig.slack.permalink(CHANNEL, rig.threads["op-4"])
    assert link in replies[1].text and "op-4" in json.dumps(replies[1].blocks)
    assert "FAIL" in replies[4].text


async def test_audit_counts_what_there_is(rig: AuditRig) -> None:
    await rig.command("ct130 5")
    parent, replies = await rig.trail(1)
    assert parent.text == "Audit trail for ct130: last 1 operation"
    assert len(replies) == 1
    await rig.command("ct131")
    await rig.slack.wait_until(lambda: sum(m.text.startswith("Audit trail") for m in rig.slack.messages_in(CHANNEL)
                                           if not m.is_reply) == 2, what="the second audit parent")
    parent, replies = await rig.trail(0)
    assert parent.text == "Audit trail for ct131: no operations recorded yet"
    assert replies == []


async def test_unknown_host_is_ephemeral_and_audited(rig: AuditRig) -> None:
    response = await rig.command("ct999")
    reply = response.json()
    assert reply["response_type"] == "ephemeral"
    assert "unknown host" in reply["text"] and "known hosts: ct129, ct130, ct131" in reply["text"]
    assert rig.slack.calls_to("chat.postMessage") == []
    kind, _, details = rig.events()[-1]
    assert kind == "refused" and details["text"] == "ct999"
    assert (details["requested_host"], details["origin"]["via"], details["origin"]["channel"]) == (
        "ct999", "slack", CHANNEL), "the CLI's refusal shape (bot/cli/terminal.py Session.refused)"
    # one refusal shape for both front-ends: the view names what was asked, by whom, through which, where
    refusal = sqlite3.connect(rig.db).execute(
        "SELECT requested_host, via, channel, actor, reason FROM refusals WHERE kind = 'refused'").fetchall()
    assert [row[:4] for row in refusal] == [("ct999", "slack", CHANNEL, f"slack:{USER}")]
    assert "unknown host" in refusal[0][4]


async def test_bad_count_and_wrong_channel_are_ephemeral(rig: AuditRig) -> None:
    for text in ("ct129 500", "ct129 many", "ct129 3 extra"):
        reply = (await rig.command(text)).json()
        assert reply["response_type"] == "ephemeral" and "/audit [HOST] [N]" in reply["text"]
    reply = (await rig.command("ct129", channel="C0RANDOM")).json()
    assert reply["response_type"] == "ephemeral" and "does not take commands in this channel" in reply["text"]
    assert rig.slack.calls_to("chat.postMessage") == []
    assert [kind for kind, _, _ in rig.events()[-4:]] == ["refused"] * 4


async def test_audit_help_is_the_ack(rig: AuditRig) -> None:
    reply = (await rig.command("help")).json()
    assert "/audit [HOST] [N]" in reply["text"]
    assert rig.slack.calls_to("chat.postMessage") == []


async def test_a_hand_edited_blob_is_an_ephemeral_error_naming_the_row(rig: AuditRig) -> None:
    """A BLOB `actor` (what no append writes) makes `/audit` say which event cannot be read, nothing else."""
    conn = sqlite3.connect(rig.db, isolation_level=None)
    event_id = conn.execute("SELECT min(id) FROM events WHERE kind = 'requested' AND operation_id = 'op-5'"
                            ).fetchone()[0]
    guard = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events_are_append_only_update'").fetchone()[0]
    conn.executescript(f"DROP TRIGGER events_are_append_only_update; UPDATE events SET actor = X'00ff' "
                       f"WHERE id = {event_id}; {guard};")
    conn.close()
    reply = (await rig.command("ct129")).json()
    assert reply["response_type"] == "ephemeral"
    assert f"event #{event_id} cannot be read: actor is a BLOB, not text" in reply["text"]
    assert "audit verify" in reply["text"]
    assert rig.slack.calls_to("chat.postMessage") == []


async def test_an_operation_from_another_channel_is_counted_not_told(rig: AuditRig) -> None:
    """Everyone in the channel reads the trail: an operation run in a channel they may not be in is not listed."""
    await record_operation(rig.store, "op-6", host="ct130", origin=slack_origin("U0EVE", "C0PRIVATE", "1.000100"),
                           verdict="fail")
    await rig.command("ct130 5")
    parent, replies = await rig.trail(1)
    assert parent.text == "Audit trail for ct130: last 1 operation"
    assert "op-6" not in json.dumps([reply.blocks for reply in replies]) and "U0EVE" not in json.dumps(parent.blocks)
    assert "1 more ran in other channels: not shown here" in json.dumps(parent.blocks)
    assert ("chat.getPermalink", "C0PRIVATE") not in {(c.method, c.args.get("channel")) for c in rig.slack.calls}
    kind, _host, details = rig.events()[-1]
    assert kind == "viewed" and details["listed"] == ["op-4"]
