"""An operation's Slack thread against the strict fake: replies in order, the parent edited at most
every 2 s however often progress comes, and always its final verdict."""

from __future__ import annotations

import asyncio
import itertools

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler

from bot.slack.redacting import RedactingWebClient
from bot.slack.thread import OperationThread
from tests.slack_fake.server import FakeSlack

CHANNEL = "C0OPS"
EDIT_EVERY_S = 2.0  # README: "progress on the parent at most every 2 s" (not read from the code under test)
STEPS = 4  # the parent and a reply per step stay inside Slack's burst of messages in a channel


def section(text: str) -> list[dict[str, object]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]


async def test_progress_edits_the_parent_at_most_every_two_seconds() -> None:
    """Progress after every check, each check's reply landing before the next: the parent is edited no
    sooner than 2 s after it was posted or last edited (here: only its verdict, unless the machine is slow)."""
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)
        thread = await OperationThread.open(client, CHANNEL, ("verifying ct129", section("verifying ct129")))
        for step in range(1, STEPS + 1):
            thread.update((f"{step}/{STEPS} checks", section(f"{step}/{STEPS} checks")))
            thread.reply((f"check {step}: pass", section(f"check {step}: pass")))
            await slack.wait_until(lambda step=step: len(slack.thread(CHANNEL, thread.ts)) == step,
                                   what=f"reply {step}")  # the worker is past this step's update too
        await thread.finish(("ct129 verify: PASS", section("ct129 verify: PASS")))
        parent = slack.message(CHANNEL, thread.ts)
        assert parent.edits[-1].text == "ct129 verify: PASS"
        progress = [parent.posted_at, *parent.update_times[:-1]]
        assert all(b - a >= EDIT_EVERY_S for a, b in itertools.pairwise(progress)), progress
        assert [reply.text for reply in slack.thread(CHANNEL, thread.ts)] == [
            f"check {n}: pass" for n in range(1, STEPS + 1)]


async def test_threads_at_once_in_one_channel_all_show_their_verdict() -> None:
    """Slack takes about a message a second per channel: operations running together in one channel outrun the
    client's three retries of a 429 (serve's setting). Every thread still gets each reply, in order, and its
    verdict; none is left saying "verifying" (the bench of 50 concurrent /verify found that)."""
    threads_at_once, replies = 3, 3
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        slack.set_rate_limit("chat.postMessage", max_calls=2, per_seconds=1.0)
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url,
                                    retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)])

        async def one(name: str) -> str:
            thread = await OperationThread.open(client, CHANNEL, (f"verifying {name}", section(f"verifying {name}")))
            for step in range(1, replies + 1):
                thread.reply((f"{name} check {step}: pass", section(f"{name} check {step}: pass")))
            await thread.finish((f"{name} verify: PASS", section(f"{name} verify: PASS")))
            return thread.ts

        names = [f"ct{n}" for n in range(threads_at_once)]
        parents = await asyncio.gather(*(one(name) for name in names))
        assert any(call.error == "ratelimited" for call in slack.calls_to("chat.postMessage"))
        for name, ts in zip(names, parents, strict=True):
            assert slack.message(CHANNEL, ts).text == f"{name} verify: PASS"
            assert [reply.text for reply in slack.thread(CHANNEL, ts)] == [
                f"{name} check {step}: pass" for step in range(1, replies + 1)]


async def test_a_reply_slack_refuses_is_skipped_and_the_verdict_still_lands() -> None:
    """One reply Slack answers with an error (not a rate limit: no waiting for it) is left out, logged; the
    replies after it and the verdict on the parent are still posted."""
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)
        thread = await OperationThread.open(client, CHANNEL, ("verifying ct129", section("verifying ct129")))
        thread.reply(("check 1: pass", section("check 1: pass")))
        thread.reply(("check 2: pass", [{"type": "no_such_block"}]))  # Slack: invalid_blocks
        thread.reply(("check 3: pass", section("check 3: pass")))
        await thread.finish(("ct129 verify: PASS", section("ct129 verify: PASS")))
        assert [call.error for call in slack.calls_to("chat.postMessage")].count("invalid_blocks") == 1
        assert [reply.text for reply in slack.thread(CHANNEL, thread.ts)] == ["check 1: pass", "check 3: pass"]
        assert slack.message(CHANNEL, thread.ts).text == "ct129 verify: PASS"
