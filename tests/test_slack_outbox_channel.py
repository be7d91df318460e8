"""Tier 1: one channel's outbox carries everything posted there (bot/slack/posting.py), against the strict fake at
Slack's per-channel pace, sped up tenfold on both sides (the fake's bucket and bot/slack/pace.py): a fleet verify, a
watch alert and a /verify at once all arrive, each thread in order, each verdict after its own evidence, and
nothing is refused for pace; two replicas posting in one channel lose nothing and wait out each 429 they meet;
a full outbox leaves out only passing replies, logged and audited, never a failure's evidence."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import outbox, pace
from bot.slack import thread as thread_module
from bot.slack.fleet import post_outcome
from bot.slack.fleet_blocks import FleetView
from bot.slack.outbox import ChannelOutbox, record_left_out, unretried
from bot.slack.posting import post
from bot.slack.redacting import RedactingWebClient
from bot.slack.serve import left_out_recorder
from bot.slack.thread import OperationThread
from bot.slack.watch import post_announcement
from commands.findings import Evidence, Finding
from commands.inventory.watch import WatchEntry
from commands.operation import OperationResult
from commands.store.db import AuditStore
from commands.verify.fleet import FleetResult
from commands.vocabulary import Change, Operation, Verdict
from commands.watch.state import Announcement, HostChange, Result
from tests.slack_fake.server import FakeSlack

CHANNEL = "C0OPS"
SPEED = 10.0  # Slack's one message a second, ten times as fast (both sides)
SINCE = datetime(2026, 12, 1, 12, 10, tzinfo=UTC)
EVIDENCE = Evidence("sha256sum -- /srv/a", 0, "abc  /srv/a", 0.01)


@pytest.fixture(autouse=True)
def sped_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pace, "POST_PER_S", SPEED)
    monkeypatch.setattr(pace, "POST_BURST", 3)


def fake_at_speed(slack: FakeSlack) -> RedactingWebClient:
    slack.set_post_pace(SPEED, 3)
    return RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)


def refused_for_pace(slack: FakeSlack) -> int:
    return sum(call.http_status == 429 for call in slack.calls)


def host_result(host: str, index: int, failing: str | None) -> OperationResult:
    findings = [Finding("main-pid", "pass", "PID 4242 running", EVIDENCE)]
    if failing:
        findings.append(Finding("cmdline", "fail", f"missing --flag-{failing}", EVIDENCE))
    return OperationResult(f"op-{index}", Operation.VERIFY, host, "2026-12-01T12:10:00Z", 1.0, findings)


def fleet_of(hosts: int, ways: int) -> FleetResult:
    """``hosts`` hosts, the first ``ways`` each failing its own way (a group reply each), the rest passing."""
    results = [host_result(f"ct{n}", n, str(n) if n < ways else None) for n in range(hosts)]
    return FleetResult("op-fleet", Operation.VERIFY, "gpu", "2026-12-01T12:10:00Z", 3.0, results)


async def run_fleet(client: RedactingWebClient, hosts: int, ways: int) -> OperationThread:
    thread = await OperationThread.open(client, CHANNEL, (f"0/{hosts} hosts · verifying gpu", []))
    for done in range(1, hosts + 1):
        thread.update((f"{done}/{hosts} hosts · verifying gpu", []))
        await asyncio.sleep(0.01)
    await post_outcome(thread, fleet_of(hosts, ways), FleetView("U0REQ", {}, {}))
    return thread


async def run_verify(client: RedactingWebClient, checks: int) -> OperationThread:
    thread = await OperationThread.open(client, CHANNEL, ("Verifying ct129", []))
    for n in range(1, checks + 1):
        thread.reply((f"ct129 check {n}", []), droppable=n % 3 != 0)
    await thread.finish(("verify ct129: FAIL", []))
    return thread


async def run_alert(client: RedactingWebClient, failed: int) -> None:
    fleet = FleetResult("op-watch", Operation.VERIFY, "gpu", "2026-12-01T12:10:00Z", 1.0,
                        [host_result(f"w{n}", n, f"w{n}") for n in range(failed)])
    changes = tuple(HostChange(f"w{n}", Change.FAILED, Result(Verdict.PASS), Result(Verdict.FAIL, frozenset({"x"})),
                               SINCE) for n in range(failed))
    await post_announcement(client, WatchEntry(target="gpu", every="5m", channel=CHANNEL),
                            Announcement("gpu", changes), fleet)


async def test_a_fleet_a_watch_alert_and_a_verify_in_one_channel_all_arrive_in_order_at_slacks_pace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thread_module, "VERDICT_WAITS_FOR_EVIDENCE_S", 60.0)  # the rule's bound, out of the way
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = fake_at_speed(slack)
        fleet, verify, _ = await asyncio.gather(run_fleet(client, 12, 4), run_verify(client, 9), run_alert(client, 3))
        parents = [m for m in slack.messages_in(CHANNEL) if not m.is_reply]
        assert len(parents) == 3
        [alert] = [m for m in parents if m.ts not in (fleet.ts, verify.ts)]
        assert alert.text.startswith("watch gpu: 3 hosts")
        assert [m.text for m in slack.thread(CHANNEL, verify.ts)] == [f"ct129 check {n}" for n in range(1, 10)]
        assert [m.text.split(":")[0] for m in slack.thread(CHANNEL, fleet.ts)] == [
            f"Group {n} of 4" for n in range(1, 5)]
        assert [m.text.split(":")[0] for m in slack.thread(CHANNEL, alert.ts)] == [
            f"Group {n} of 3" for n in range(1, 4)]
        verdict = slack.message(CHANNEL, verify.ts)
        assert verdict.text == "verify ct129: FAIL"
        assert verdict.edits[-1].at >= slack.thread(CHANNEL, verify.ts)[-1].posted_at, "FAIL before its evidence"
        fleet_parent = slack.message(CHANNEL, fleet.ts)
        assert fleet_parent.text.startswith("verify gpu: FAIL")
        assert fleet_parent.edits[-1].at <= slack.thread(CHANNEL, fleet.ts)[0].posted_at
        assert refused_for_pace(slack) == 0, [c.method for c in slack.calls if c.http_status == 429]


async def post_n(box: ChannelOutbox, name: str, count: int) -> list[object]:
    assert box.client is not None
    futures = [box.send(lambda n=n: box.client.chat_postMessage(channel=CHANNEL, text=f"{name} {n}"))  # type: ignore[union-attr]
               for n in range(count)]
    return await asyncio.gather(*futures, return_exceptions=True)


async def test_two_replicas_in_one_channel_lose_nothing_and_wait_out_each_429() -> None:
    """Each replica has its own outbox (no pace shared between processes): together they ask faster than Slack
    takes, so one meets 429s; it waits each one out (never asks again before Retry-After, at least 1 s), and every
    message of both arrives, each replica's in order."""
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = fake_at_speed(slack)
        one, two = ChannelOutbox(unretried(client)), ChannelOutbox(unretried(client))
        answers = await asyncio.gather(post_n(one, "a", 20), post_n(two, "b", 20))
        assert not [a for a in answers[0] + answers[1] if isinstance(a, BaseException)]
        texts = [m.text for m in slack.messages_in(CHANNEL)]
        assert [t for t in texts if t.startswith("a ")] == [f"a {n}" for n in range(20)]
        assert [t for t in texts if t.startswith("b ")] == [f"b {n}" for n in range(20)]
        refused = [call for call in slack.calls if call.http_status == 429]
        assert refused, "the two never met a 429: this test shows nothing"
        for call in refused:
            again = next(c for c in slack.calls if c.at > call.at and c.args.get("text") == call.args.get("text"))
            assert again.at - call.at >= 1.0, f"{call.args.get('text')!r} asked again before its Retry-After"
        assert len(refused) <= 6, f"{len(refused)} 429s for 40 messages"


async def test_a_429_longer_than_the_patience_is_the_callers_error_and_the_next_message_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox, "PATIENCE_S", 0.5)  # Slack's Retry-After (1 s at least) is past it
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = fake_at_speed(slack)
        slack.set_rate_limit("chat.postMessage", 1, 30.0)
        box = ChannelOutbox(unretried(client))
        first, second = await post_n(box, "a", 2)
        assert not isinstance(first, BaseException)
        assert isinstance(second, SlackApiError) and second.response["error"] == "ratelimited"
        slack.rate_limits.enabled = False
        [third] = await post_n(box, "c", 1)
        assert not isinstance(third, BaseException)
        assert [m.text for m in slack.messages_in(CHANNEL)] == ["a 0", "c 0"]


async def test_a_full_outbox_leaves_out_only_passing_replies_logged_and_audited(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(outbox, "QUEUE_CAP", 4)
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = fake_at_speed(slack)

        writes: set[asyncio.Task[None]] = set()
        record_left_out(client, left_out_recorder(audit, writes.add))  # as serve records them (its keep: a set)
        try:
            thread = await OperationThread.open(client, CHANNEL, ("Verifying ct129", []))
            for n in range(1, 13):  # every third fails: its evidence must arrive
                thread.reply((f"check {n}: {'FAIL' if n % 3 == 0 else 'pass'}", []), droppable=n % 3 != 0)
            await thread.finish(("verify ct129: FAIL", []))
            await thread.post_summary(audit, "op-ct129")  # the log holds every check; the thread says some are not here
            await asyncio.gather(*writes)  # the audit writes scheduled by the drops
        finally:
            record_left_out(client, None)
        *replies, summary = slack.thread(CHANNEL, thread.ts)
        posted = [m.text for m in replies]
        assert [t for t in posted if "FAIL" in t] == [f"check {n}: FAIL" for n in (3, 6, 9, 12)]
        assert posted == sorted(posted, key=lambda t: int(t.split()[1].rstrip(":"))), "a thread out of order"
        assert slack.message(CHANNEL, thread.ts).text == "verify ct129: FAIL"
        failing = await OperationThread.open(client, CHANNEL, ("Verifying ct130", []))
        for n in range(1, 9):  # twice the cap, nothing droppable: all kept, all posted
            failing.reply((f"ct130 check {n}: FAIL", []))
        await failing.finish(("verify ct130: FAIL", []))
        assert [m.text for m in slack.thread(CHANNEL, failing.ts)] == [f"ct130 check {n}: FAIL" for n in range(1, 9)]
    left_out = [f"check {n}: pass" for n in range(1, 13) if f"check {n}: pass" not in posted and n % 3]
    assert left_out, "nothing was left out: the cap was never reached"
    with sqlite3.connect(tmp_path / "audit.db") as db:
        rows = db.execute("SELECT json_extract(details, '$.text') FROM events WHERE kind = 'slack-left-out'"
                          " ORDER BY id").fetchall()
    audit.close()
    assert [row[0] for row in rows] == left_out
    assert f"{len(left_out)} passing replies were left out of this thread" in str(summary.blocks)
    assert "left out the passing reply 'check" in caplog.text


async def test_whichever_client_opens_a_channels_outbox_every_message_through_it_is_masked() -> None:
    """A channel's outbox is made by the first client that posts there: a plain one (no masking of its own) still
    sends through a redacting copy, so a secret in a message never reaches Slack."""
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        fake_at_speed(slack)
        plain = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        await post(plain, CHANNEL, "health: Authorization: Bearer s3cr3tTOKENvalue42")
        [message] = slack.messages_in(CHANNEL)
        assert "s3cr3tTOKENvalue42" not in message.text and "[REDACTED]" in message.text


async def test_a_recorder_set_later_reaches_the_outbox_already_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox, "QUEUE_CAP", 1)
    client = AsyncWebClient(token="xoxb-test", base_url="http://127.0.0.1:9/")  # never called: nothing is sent
    box = outbox.outbox_of(client, CHANNEL)
    said: list[str] = []
    record_left_out(client, lambda left: said.append(left.text))
    gate = asyncio.Event()
    try:
        held = box.send(gate.wait, parent=True)  # the sender waits on it: the queue stays full
        await asyncio.sleep(0)
        first = box.send(gate.wait, droppable=True, what=outbox.LeftOut(CHANNEL, "1.1", "a pass"))
        second = box.send(gate.wait, droppable=True, what=outbox.LeftOut(CHANNEL, "1.1", "b pass"))
        assert first.result() is None and not second.done()  # the oldest passing reply goes first
        assert said == ["a pass"]
    finally:
        record_left_out(client, None)
        gate.set()
    assert await held is True and await second is True  # the rest sent once the channel moves
