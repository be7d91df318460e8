"""Tier 1: Slack-started work is bounded (``limits`` in the inventory), through the real bolt app and the
strict fake Slack.

Eight fleet verifies from one user at once over hosts that hang (a black-holed proxy to a loopback
host): ``per_user`` start, the rest are refused ephemerally naming what runs, each refusal a
``refused`` event; the same request from someone else is answered with the running one's thread;
past ``total`` everyone is refused; host verifies across fleets never exceed ``hosts`` (counted from
the audit log's own events); every slot is given back when the work ends, fails or raises.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, demo_host
from bot.slack.app import BotContext, build_app
from commands.errors import InventoryError
from commands.inflight import InFlight, OverLimit, Work
from commands.inventory import Limits, parse_inventory
from commands.store.db import AuditStore
from tests.conftest import write_inventory
from tests.fleet_rig import fleet_entry, proxied_known_hosts
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.serve_rig import free_port, kinds, start_serve
from tests.slack_fake.records import HttpAck, Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import slash_command_body
from tests.test_serve_live_holders import SECRET as SERVE_SECRET
from tests.test_slack_restore import APPROVER, Rig, is_final
from tests.test_slack_restore import SECRET as RESTORE_SECRET

SECRET = "limits-secret"
CHANNEL = "C0OPS"
ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"
HOSTS = [f"h{n}" for n in range(1, 7)]
# Eight different fleets (no two the same hosts): what one user clicked in a hurry.
EIGHT = ["h1 h2", "h1 h3", "h1 h4", "h1 h5", "h1 h6", "h2 h3", "h2 h4", "h2 h5"]


@dataclass
class LimitsRig:
    slack: FakeSlack
    url: str
    db: Path
    context: BotContext
    proxy: DelayProxy

    async def verify(self, text: str, user: str) -> HttpAck:
        return await self.slack.deliver(self.url, slash_command_body("/verify", text, user, CHANNEL,
                                                                     self.slack.response_url(), "t1"))

    def parents(self) -> list[Message]:
        return [m for m in self.slack.messages_in(CHANNEL) if not m.is_reply]

    def refused(self) -> list[tuple[str, dict[str, Any]]]:
        rows = sqlite3.connect(self.db).execute("SELECT actor, details FROM events WHERE kind = 'refused' ORDER BY id")
        return [(actor, json.loads(details)) for actor, details in rows]

    def fleets_requested(self) -> int:
        return int(sqlite3.connect(self.db).execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'requested' AND host IS NULL").fetchone()[0])

    def most_host_verifies_at_once(self) -> int:
        """From the audit log alone: host verifies of fleets requested and not yet finished, at their peak."""
        rows = sqlite3.connect(self.db).execute(
            "SELECT kind, operation_id, details FROM events WHERE host IS NOT NULL AND kind IN ('requested', "
            "'finished') ORDER BY id").fetchall()
        open_now: set[str] = set()
        most = 0
        for kind, operation_id, details in rows:
            if kind == "requested" and json.loads(details).get("fleet_operation_id"):
                open_now.add(operation_id)
                most = max(most, len(open_now))
            elif kind == "finished":
                open_now.discard(operation_id)
        return most


def is_done(message: Message) -> bool:
    return message.text.startswith("verify ")  # progress reads "1/2 hosts · …"


@pytest_asyncio.fixture(loop_scope="session")
async def limits_rig(clean_host: DemoHost, tmp_path: Path) -> AsyncIterator[LimitsRig]:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        known = proxied_known_hosts(clean_host, proxy.port, tmp_path / "known_hosts")
        document = clean_host.inventory()
        document["ssh"]["connect_timeout_s"] = 120  # a host hangs until the test restores the link
        document["hosts"] = {name: fleet_entry(clean_host, proxy.port, known) for name in HOSTS}
        document["fleet"] = {"max_parallel": 2, "host_deadline_s": 180}
        document["limits"] = {"per_user": 2, "total": 3, "hosts": 2}
        document["channels"] = [CHANNEL]
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
            context = BotContext(inventory, audit)
            app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
            try:
                async with serving(app) as url:
                    yield LimitsRig(slack, url, tmp_path / "audit.db", context, proxy)
            finally:
                proxy.restore()
                audit.close()


def ack_text(ack: HttpAck) -> str:
    """The ephemeral reply carried by the ack, or "" for a plain ack (the work started)."""
    assert ack.status_code == 200
    return str(ack.json().get("text", "")) if ack.text else ""


async def test_eight_fleet_verifies_from_one_user_start_per_user_and_the_rest_are_refused_naming_them(
        limits_rig: LimitsRig) -> None:
    rig = limits_rig
    rig.proxy.blackhole()
    acks = await asyncio.gather(*(rig.verify(text, ALICE) for text in EIGHT))
    started = [text for text, ack in zip(EIGHT, acks, strict=True) if not ack_text(ack)]
    refusals = [ack_text(ack) for ack in acks if ack_text(ack)]
    assert len(started) == 2 and len(refusals) == 6, refusals
    for refusal in refusals:
        assert "you already have 2 operations in flight (limits.per_user is 2)" in refusal
        assert all(f"• verify {text} by <@{ALICE}> since <!date^" in refusal for text in started), refusal
    await rig.slack.wait_until(lambda: len(rig.parents()) == 2, what="two fleet parents")
    # A fleet's parent is posted before its `requested` event is written (the event names the thread).
    await until("both fleets requested in the audit log", lambda: rig.fleets_requested() >= 2)
    assert rig.fleets_requested() == 2
    alice_refused = [details for actor, details in rig.refused() if actor == f"slack:{ALICE}"]
    assert len(alice_refused) == 6
    assert all(len(details["running"]) == 2 and "limits.per_user" in details["reason"] for details in alice_refused)

    # The same request from someone else: the running one's thread, nothing new.
    await until("both fleets' threads known", lambda: all(t.thread_ts for t in rig.context.inflight.running()))
    same = ack_text(await rig.verify(started[0], BOB))
    parent = next(p for p in rig.parents() if f"verifying {started[0]}" in p.text)
    assert f"the same verify {started[0]} is already running: nothing new was started" in same
    assert f"• verify {started[0]} by <@{ALICE}> since <!date^" in same
    assert f"<{rig.slack.permalink(CHANNEL, parent.ts)}|its thread>" in same
    assert rig.fleets_requested() == 2

    # Past the total: Bob's own fleet is the third; Carol is refused, told all three with their threads.
    assert ack_text(await rig.verify("h5 h6", BOB)) == ""
    await rig.slack.wait_until(lambda: len(rig.parents()) == 3, what="Bob's fleet")
    await until("three threads known", lambda: all(t.thread_ts for t in rig.context.inflight.running()))
    over = ack_text(await rig.verify("h3 h6", CAROL))
    assert "proofbot already has 3 operations in flight (limits.total is 3)" in over
    assert over.count("|its thread>") == 3 and f"by <@{BOB}>" in over
    assert [actor for actor, _ in rig.refused()][-2:] == [f"slack:{BOB}", f"slack:{CAROL}"]

    rig.proxy.restore()  # the hosts answer: every fleet finishes, each slot is given back
    await rig.slack.wait_until(lambda: all(is_done(p) for p in rig.parents()), timeout=120, what="three verdicts")
    await until("every slot given back", lambda: not rig.context.inflight.running())
    assert rig.most_host_verifies_at_once() == 2  # 3 fleets of 2 hosts, limits.hosts 2
    assert rig.context.inflight.most_hosts_in_flight == 2

    # A failure (Slack refuses the verdict: the channel was archived meanwhile) gives its slot back too.
    rig.proxy.blackhole()
    failing = await asyncio.gather(rig.verify("h1 h2", ALICE), rig.verify("h3 h4", ALICE))
    assert [ack_text(ack) for ack in failing] == ["", ""]
    await rig.slack.wait_until(lambda: len(rig.parents()) == 5, what="two more parents")
    rig.slack.channels[CHANNEL].is_archived = True
    rig.proxy.restore()
    await until("slots given back after a failure", lambda: not rig.context.inflight.running(), 120)
    assert [call.error for call in rig.slack.calls_to("chat.update")][-2:] == ["is_archived", "is_archived"]
    rig.slack.channels[CHANNEL].is_archived = False
    again = await asyncio.gather(rig.verify("h1 h2", ALICE), rig.verify("h3 h4", ALICE))
    assert [ack_text(ack) for ack in again] == ["", ""]
    await rig.slack.wait_until(lambda: len(rig.parents()) == 7 and all(is_done(p) for p in rig.parents()[-2:]),
                               timeout=120, what="both verdicts")
    rig.slack.warnings.clear()  # the archived channel's refusals, expected


def test_identical_work_is_the_same_whatever_the_order_of_its_hosts() -> None:
    a = Work("slack:U1", "verify", ("h1", "h2"), ("b", None))
    b = Work("slack:U2", "verify", ("h2", "h1"), (None, "b"))
    assert a.key == b.key
    assert a.key != Work("slack:U1", "verify", ("h1", "h2"), ("b", "b")).key  # another backup: other work
    assert a.key != Work("slack:U1", "verify", ("h1", "h2"), ("b", None), plan_id="p").key


async def test_a_slot_is_given_back_when_its_work_is_cancelled_or_raises() -> None:
    inflight = InFlight(Limits(per_user=1, total=1))
    entered = asyncio.Event()

    async def work() -> None:
        with inflight.start(Work("slack:U1", "verify", ("h1",))):
            entered.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(work())
    await entered.wait()
    with pytest.raises(OverLimit):
        inflight.start(Work("slack:U1", "verify", ("h2",)))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert inflight.running() == []
    with pytest.raises(RuntimeError), inflight.start(Work("slack:U1", "verify", ("h2",))):
        raise RuntimeError("a bug in the work")
    assert inflight.running() == []


async def test_an_approval_past_the_limit_is_refused_and_the_plan_stays_pending(tmp_path: Path) -> None:
    async with demo_host("ct129") as host, DelayProxy("127.0.0.1", host.ssh_port) as proxy:
        document = host.inventory()
        document["ssh"]["connect_timeout_s"] = 120
        document["hosts"]["slow"] = fleet_entry(host, proxy.port,
                                                proxied_known_hosts(host, proxy.port, tmp_path / "known_hosts"))
        document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False, "expire_after_s": 900}
        document["limits"] = {"per_user": 1, "total": 4}
        document["groups"] = {"gpu": ["ct129"]}
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=RESTORE_SECRET) as slack:
            context = BotContext(inventory, audit)
            app = build_app(context, bot_token=slack.bot_token, signing_secret=RESTORE_SECRET,
                            api_url=slack.api_url)
            try:
                async with serving(app) as url:
                    rig = Rig(slack, url, tmp_path / "audit.db", host)
                    proxy.blackhole()
                    assert (await rig.command("/verify", "slow", APPROVER)).text == ""  # the approver's one slot
                    await until("the approver's verify in flight", lambda: len(context.inflight.running()) == 1)
                    for command, text in (("/restore", "ct129"), ("/restart", "ct129"), ("/restart", "gpu")):
                        said = ack_text(await rig.command(command, text, APPROVER))  # plans are work too
                        assert "(limits.per_user is 1)" in said and "• verify slow by" in said, (command, text)
                    assert len(rig.events("refused")) == 3 and len(rig.events("requested")) == 1  # the verify only

                    assert (await rig.restore()).status_code == 200
                    plan = await rig.restore_plan_message()

                    _, said = await rig.click(plan, "restore_approve", APPROVER)
                    await slack.wait_until(lambda: bool(slack.responses_to(said)), what="the refusal")
                    refusal = slack.responses_to(said)[0].body["text"]
                    assert "you already have 1 operation in flight (limits.per_user is 1)" in refusal
                    assert f"• verify slow by <@{APPROVER}>" in refusal
                    assert rig.events("approved") == [] and rig.events("refused")[-1]["running"][0]["what"] == \
                        "verify slow"
                    state = sqlite3.connect(rig.db).execute("SELECT state FROM plans").fetchone()[0]
                    assert state == "pending"  # nothing decided: it may be approved once the slot is free

                    proxy.restore()
                    await until("the verify's slot given back", lambda: not context.inflight.running(), 60)
                    await rig.click(plan, "restore_approve", APPROVER)
                    await slack.wait_until(lambda: is_final(slack.message(CHANNEL, plan.ts)), timeout=60,
                                           what="the restore's verdict")
                    assert len(rig.events("approved")) == 1
                    await until("the apply's slot given back", lambda: not context.inflight.running())
            finally:
                timers = list(context.timers)
                for timer in timers:
                    timer.cancel()
                await asyncio.gather(*timers, return_exceptions=True)  # ended before the store closes
                audit.close()


async def test_a_real_serve_takes_its_limits_from_the_inventory(clean_host: DemoHost, tmp_path: Path) -> None:
    """``proofbot serve --http`` as deployed: the inventory's limits hold for signed commands from Slack."""
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy, \
            FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SERVE_SECRET) as slack:
        known = proxied_known_hosts(clean_host, proxy.port, tmp_path / "known_hosts")
        document = clean_host.inventory()
        document["ssh"]["connect_timeout_s"] = 120
        document["hosts"] = {name: fleet_entry(clean_host, proxy.port, known) for name in ("h1", "h2")}
        document["limits"] = {"per_user": 1}
        inventory = write_inventory(tmp_path / "inventory.yml", document)
        db = tmp_path / "audit.db"
        proxy.blackhole()
        bot = await start_serve(slack, inventory, db, port := await free_port())
        try:
            await until("the bot to start", lambda: db.exists() and "bot-started" in kinds(db), 30)
            url = f"http://127.0.0.1:{port}/slack/events"
            first = await slack.deliver(url, slash_command_body("/verify", "h1", ALICE, CHANNEL, slack.response_url(),
                                                                "t1"))
            assert first.text == ""
            await slack.wait_until(lambda: len(slack.messages_in(CHANNEL)) == 1, what="the first verify's parent")
            second = ack_text(await slack.deliver(url, slash_command_body("/verify", "h2", ALICE, CHANNEL,
                                                                          slack.response_url(), "t1")))
            assert "(limits.per_user is 1)" in second and "|its thread>" in second
            assert kinds(db).count("refused") == 1
            proxy.restore()
            await slack.wait_until(lambda: any(m.text.startswith("Summary of operation") for m in
                                               slack.messages_in(CHANNEL)), timeout=60,
                                   what="the first verify's thread to end")
            accepted: list[bool] = []

            async def ask_again() -> None:  # the slot is given back just after the thread's last post
                while not accepted:
                    ack = await slack.deliver(url, slash_command_body("/verify", "h2", ALICE, CHANNEL,
                                                                      slack.response_url(), "t1"))
                    accepted.extend([True] if ack.text == "" else [])
                    await asyncio.sleep(0.1)
            await asyncio.wait_for(ask_again(), 30)  # the slot was given back
            await until("the second verify to finish", lambda: kinds(db).count("finished") == 2, 60)
        finally:
            bot.terminate()
            await bot.wait()


async def test_re_verify_clicked_twice_starts_once_and_links_the_second(limits_rig: LimitsRig,
                                                                        clean_host: DemoHost) -> None:
    rig = limits_rig
    rig.proxy.blackhole()
    assert ack_text(await rig.verify("h1 h2", ALICE)) == ""
    await rig.slack.wait_until(lambda: len(rig.parents()) == 1, what="the fleet's parent")


    def dropped_until_done() -> bool:  # the link drops, again for each connection: neither host can be checked
        rig.proxy.reset()
        return is_done(rig.parents()[0])
    await until("the fleet's verdict", dropped_until_done, 60, interval_s=0.2)
    [parent] = rig.parents()
    assert "Re-verify the 2 that failed" in json.dumps(parent.blocks)
    await until("its slot given back", lambda: not rig.context.inflight.running())

    clicker = Rig(rig.slack, rig.url, rig.db, clean_host)
    (first, first_url), (second, second_url) = await asyncio.gather(
        clicker.click(parent, "fleet_reverify", ALICE), clicker.click(parent, "fleet_reverify", BOB))
    assert first.status_code == second.status_code == 200
    await rig.slack.wait_until(lambda: len(rig.parents()) == 2, what="one new parent")
    await rig.slack.wait_until(lambda: bool(rig.slack.responses_to(first_url) or rig.slack.responses_to(second_url)),
                               what="the second click's answer")
    [linked] = [post.body["text"] for url in (first_url, second_url) for post in rig.slack.responses_to(url)]
    assert "is already running: nothing new was started" in linked and "by <@U0" in linked
    await until("the re-verify requested in the audit log", lambda: rig.fleets_requested() >= 2)
    assert rig.fleets_requested() == 2 and len(rig.refused()) == 1
    rig.proxy.restore()
    await rig.slack.wait_until(lambda: is_done(rig.parents()[1]), timeout=60, what="the re-verify's verdict")


def test_bad_limits_are_refused_with_their_line() -> None:
    text = yaml.safe_dump({"limits": {"per_user": 0, "total": "many"}, "hosts": {"ct1": {"address": "127.0.0.1"}}},
                          sort_keys=False)
    with pytest.raises(InventoryError) as refused:
        parse_inventory(text, "inv.yml")
    assert "inv.yml:2: limits.per_user: Input should be greater than or equal to 1" in refused.value.message
    assert "inv.yml:3: limits.total: Input should be a valid integer" in refused.value.message
    assert parse_inventory("hosts: {ct1: {address: 127.0.0.1}}", "inv.yml").limits == Limits(per_user=4, total=16,
                                                                                                hosts=32)
