"""First contact in Slack: the App Home (every host's last verdict by group, refreshed as operations
finish, summarised past Slack's 100 blocks) and the one help message when proofbot is invited to a
channel. Events are delivered by the strict fake Slack (views validated) to the real bolt app over HTTP."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.demo.host import demo_host
from bot.slack.app import BotContext, build_app
from bot.slack.home import HOME_MIN_INTERVAL_S
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.audit_events import raw_append
from tests.slack_fake.server import BOT_USER_ID, FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import slash_command_body

SECRET = "home-secret"
CHANNEL, OTHER_CHANNEL = "C0OPS", "C0RANDOM"
ALICE, APPROVER, BOB, CAROL = "U0ALICE", "U0APPROVER", "U0BOB", "U0CAROL"
SECRET_CHANNEL = "C0INCIDENT"


@dataclass
class HomeRig:
    slack: FakeSlack
    url: str
    context: BotContext

    def home_text(self, user: str = ALICE) -> str:
        view = self.slack.home_of(user)
        return json.dumps(view["blocks"], ensure_ascii=False) if view else ""

    async def open_home(self, user: str = ALICE) -> dict[str, Any]:
        published = len(self.slack.calls_to("views.publish"))
        ack = await self.slack.deliver_event(self.url, {"type": "app_home_opened", "user": user, "tab": "home",
                                                        "channel": "D0HOME"})
        assert ack.status_code == 200
        await self.slack.wait_for("views.publish", published + 1)
        view = self.slack.home_of(user)
        assert view is not None
        return view


@asynccontextmanager
async def home_rig(tmp_path: Path, document: dict[str, Any],
                   more_channels: tuple[tuple[str, str, tuple[str, ...]], ...] = ()) -> AsyncIterator[HomeRig]:
    """``more_channels``: (id, name, members) of channels proofbot also works in."""
    document["approvals"] = {"approvers": [APPROVER]}
    document["channels"] = [CHANNEL, *(channel for channel, _, _ in more_channels)]
    inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        slack.add_channel(OTHER_CHANNEL, "random")
        slack.channels[CHANNEL].members = {ALICE, APPROVER}
        for channel, name, members in more_channels:
            slack.add_channel(channel, name)
            slack.channels[channel].members = set(members)
        context = BotContext(inventory, audit)
        app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
        try:
            async with serving(app) as url:
                yield HomeRig(slack, url, context)
        finally:
            timers = list(context.timers)
            for timer in timers:
                timer.cancel()
            await asyncio.gather(*timers, return_exceptions=True)  # stopped before the store closes
            audit.close()


async def test_home_shows_each_hosts_last_verdict_by_group_and_refreshes_when_an_operation_ends(
        tmp_path: Path) -> None:
    async with demo_host("ct129") as host:
        document = host.inventory()
        document["hosts"]["ct130"] = {"address": "127.0.0.1", "port": 9}  # nothing listens: error
        document["hosts"]["ct131"] = {"address": "127.0.0.1", "port": 9}
        document["groups"] = {"gpu": ["ct129", "ct130"], "east": ["ct130"]}
        async with home_rig(tmp_path, document) as rig:
            inventory = rig.context.inventory
            await verify(VerifyPlan.for_host(inventory.host("ct130"), None), origin=Origin.local_user(),
                         audit=rig.context.audit)  # from the CLI, on the same audit DB
            view = await rig.open_home()
            lines = [block["text"]["text"] for block in view["blocks"] if block["type"] == "section"]
            assert lines[0] == "*east* (1 host)" and "*ct130* — *COULD NOT CHECK* (verify)" in lines[1]
            assert "(from the CLI, no thread)" in lines[1]
            assert lines[2] == "*gpu* (2 hosts)" and "*ct129* — never checked" in lines[3]
            assert "*ct130*" in lines[4]  # in each of its groups
            assert lines[5] == "*in no group* (1 host)" and "*ct131* — never checked" in lines[6]
            first = rig.slack.calls_to("views.publish")[-1]

            ack = await rig.slack.deliver(rig.url, slash_command_body("/verify", "ct129", ALICE, CHANNEL,
                                                                      rig.slack.response_url(), "t"))
            assert ack.status_code == 200
            await rig.slack.wait_until(lambda: "*ct129* — *FAIL*" in rig.home_text(), timeout=30,
                                       what="the Home re-published with ct129's verdict")
            parent = next(m for m in rig.slack.messages_in(CHANNEL) if not m.is_reply)
            assert f"<{rig.slack.permalink(CHANNEL, parent.ts)}|thread>" in rig.home_text()
            assert f"by <@{ALICE}>" in rig.home_text()
            publishes = [call.at for call in rig.slack.calls_to("views.publish")]
            assert all(later - earlier >= HOME_MIN_INTERVAL_S for earlier, later in itertools.pairwise(publishes))
            assert publishes[0] == first.at


async def test_a_fleet_past_100_blocks_is_summarised_with_the_hosts_that_did_not_pass(tmp_path: Path) -> None:
    hosts = {f"gpu{n:03d}": {"address": "127.0.0.1", "port": 9} for n in range(150)}
    document: dict[str, Any] = {"hosts": hosts, "groups": {"west": [f"gpu{n:03d}" for n in range(100)],
                                                           "east": [f"gpu{n:03d}" for n in range(100, 150)]}}
    async with home_rig(tmp_path, document) as rig:
        audit, actor = rig.context.audit, "ops@cli"
        for n in range(140):  # 140 verified from the CLI: the last three of them failed
            verdict = "fail" if n in (7, 120, 121) else "pass"
            await raw_append(audit, "requested", operation_id=f"op-{n}", operation="verify", host=f"gpu{n:03d}",
                               actor=actor, details={"origin": {"via": "cli"}})
            await raw_append(audit, "finished", operation_id=f"op-{n}", operation="verify", host=f"gpu{n:03d}",
                               actor=actor, details={"verdict": verdict})
        view = await rig.open_home()
        assert len(view["blocks"]) <= 100  # and the fake accepted it as a valid Home view
        text = json.dumps(view["blocks"], ensure_ascii=False)
        assert "*west* (100 hosts): 99 PASS, 1 FAIL" in text
        assert "*east* (50 hosts): 38 PASS, 2 FAIL, 10 never checked" in text
        assert all(f"*gpu{n:03d}* — *FAIL*" in text for n in (7, 120, 121))
        assert all(f"*gpu{n:03d}* — never checked" in text for n in range(140, 150))
        assert "*gpu008*" not in text  # passing hosts are counted, not listed
        assert "only those that did not pass" in text


async def test_invited_to_a_channel_it_posts_one_short_help(tmp_path: Path) -> None:
    document: dict[str, Any] = {"hosts": {"ct1": {"address": "127.0.0.1", "port": 9}}}
    async with home_rig(tmp_path, document) as rig:
        await rig.slack.deliver_event(rig.url, {"type": "member_joined_channel", "user": ALICE,
                                                "channel": CHANNEL, "channel_type": "C", "team": "T0TEST"})
        ack = await rig.slack.deliver_event(rig.url, {"type": "member_joined_channel", "user": BOT_USER_ID,
                                                      "channel": CHANNEL, "channel_type": "C", "team": "T0TEST"})
        assert ack.status_code == 200
        (posted,) = await rig.slack.wait_for("chat.postMessage")
        (message,) = rig.slack.messages_in(CHANNEL)  # one, and none for Alice joining
        body = message.blocks[0]["text"]["text"] if message.blocks else ""
        assert all(f"`/{name} " in body for name in ("verify", "restore", "restart", "audit"))
        assert f"wait for an approver: <@{APPROVER}>" in body and "Commands work in this channel." in body
        await rig.slack.deliver_event(rig.url, {"type": "member_joined_channel", "user": BOT_USER_ID,
                                                "channel": OTHER_CHANNEL, "channel_type": "C", "team": "T0TEST"})
        await rig.slack.wait_for("chat.postMessage", 2)
        (elsewhere,) = rig.slack.messages_in(OTHER_CHANNEL)
        assert f"does not take commands in this channel; use <#{CHANNEL}>" in (elsewhere.blocks or [{}])[0]["text"][
            "text"]
        assert posted.ok


async def test_the_home_shows_each_viewer_only_the_channels_they_are_in(tmp_path: Path) -> None:
    document: dict[str, Any] = {"hosts": {name: {"address": "127.0.0.1", "port": 9} for name in ("ct1", "ct2")}}
    async with home_rig(tmp_path, document, more_channels=((SECRET_CHANNEL, "incident", (BOB,)),)) as rig:
        for host, user, channel in (("ct1", ALICE, CHANNEL), ("ct2", BOB, SECRET_CHANNEL)):
            ack = await rig.slack.deliver(rig.url, slash_command_body("/verify", host, user, channel,
                                                                      rig.slack.response_url(), "t"))
            assert ack.status_code == 200
        await rig.slack.wait_until(lambda: all(m.edits and "COULD NOT CHECK" in m.text for m in (
            *rig.slack.messages_in(CHANNEL), *rig.slack.messages_in(SECRET_CHANNEL)) if not m.is_reply)
            and len(rig.slack.calls_to("chat.postMessage")) >= 2, timeout=30, what="both verdicts")
        [ops] = [m for m in rig.slack.messages_in(CHANNEL) if not m.is_reply]
        [incident] = [m for m in rig.slack.messages_in(SECRET_CHANNEL) if not m.is_reply]

        await rig.open_home(ALICE)
        alice = rig.home_text(ALICE)
        assert "*ct1* — *COULD NOT CHECK*" in alice and rig.slack.permalink(CHANNEL, ops.ts) in alice
        assert "*ct2* — last operation in a channel you are not in" in alice
        assert SECRET_CHANNEL not in alice and BOB not in alice and incident.ts.replace(".", "") not in alice

        await rig.open_home(BOB)
        bob = rig.home_text(BOB)
        assert "*ct2* — *COULD NOT CHECK*" in bob and rig.slack.permalink(SECRET_CHANNEL, incident.ts) in bob
        assert "*ct1* — last operation in a channel you are not in" in bob and ALICE not in bob

        await rig.open_home(CAROL)  # in no channel proofbot works in: no host at all
        carol = rig.home_text(CAROL)
        assert "ct1" not in carol and "ct2" not in carol and "You are in none of the channels" in carol

        rig.slack.scopes.discard("channels:read")  # membership unreadable: fails closed, says why
        rig.context.inventory.channels.append("C0NEW")  # not read before: asked now, and refused
        rig.slack.add_channel("C0NEW", "new")
        await rig.open_home(CAROL)
        assert "ct1" not in rig.home_text(CAROL) and "(missing_scope) could not be read" in rig.home_text(CAROL)


async def test_help_follows_the_channel_rule(tmp_path: Path) -> None:
    document: dict[str, Any] = {"hosts": {"ct1": {"address": "127.0.0.1", "port": 9}}}
    async with home_rig(tmp_path, document) as rig:
        refused = await rig.slack.deliver(rig.url, slash_command_body("/verify", "help", ALICE, OTHER_CHANNEL,
                                                                      rig.slack.response_url(), "t"))
        assert "does not take commands in this channel" in refused.json()["text"]
        assert "ct1" not in refused.json()["text"]
        rows = sqlite3.connect(tmp_path / "audit.db").execute("SELECT kind, actor, details FROM events").fetchall()
        assert [(kind, actor) for kind, actor, _ in rows] == [("refused", f"slack:{ALICE}")]
        assert json.loads(rows[0][2])["text"] == "help"
        helped = await rig.slack.deliver(rig.url, slash_command_body("/verify", "help", ALICE, CHANNEL,
                                                                     rig.slack.response_url(), "t"))
        assert "`ct1`" in helped.json()["text"]
