"""The order a channel's messages leave in (bot/slack/outbox.py), against the strict fake with Slack's per-channel
pace: a verdict is on its parent when the operation ends, not after its evidence replies have trickled out; a new
operation's parent goes before the replies already waiting; every reply still lands, each thread's in order. And
the parent edits' own budget (chat.update, per workspace): verdicts first, progress only with what is left."""

from __future__ import annotations

import asyncio

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.slack import outbox
from bot.slack import thread as thread_module
from bot.slack.outbox import ParentEdits
from bot.slack.redacting import RedactingWebClient
from bot.slack.thread import OperationThread
from tests.slack_fake.server import FakeSlack

CHANNEL = "C0OPS"
REPLIES = 4  # the first thread's evidence, queued at once
LATER = 2  # operations started while it is still being posted


def section(text: str) -> list[dict[str, object]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]


def message(text: str) -> tuple[str, list[dict[str, object]]]:
    return text, section(text)


async def test_when_slack_keeps_up_the_verdict_comes_after_its_whole_evidence() -> None:
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)
        thread = await OperationThread.open(client, CHANNEL, message("verifying h1"))
        for n in range(1, REPLIES + 1):
            thread.reply(message(f"h1 check {n}: pass"))
        await thread.finish(message("h1 verify: PASS"))
        replies = slack.thread(CHANNEL, thread.ts)
        assert [reply.text for reply in replies] == [f"h1 check {n}: pass" for n in range(1, REPLIES + 1)]
        assert slack.message(CHANNEL, thread.ts).edits[-1].at >= replies[-1].posted_at, "PASS before its evidence"


async def test_verdicts_and_new_parents_go_before_the_replies_waiting_in_the_channel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thread_module, "VERDICT_WAITS_FOR_EVIDENCE_S", 0.2)  # Slack's pace: the wait runs out
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        slack.set_rate_limit("chat.postMessage", max_calls=2, per_seconds=1.0)  # Slack's pace, quicker
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)
        first = await OperationThread.open(client, CHANNEL, message("verifying h1"))
        for n in range(1, REPLIES + 1):
            first.reply(message(f"h1 check {n}: pass"))
        finishing = asyncio.create_task(first.finish(message("h1 verify: PASS")))
        later = await asyncio.gather(*(OperationThread.open(client, CHANNEL, message(f"verifying h{n}"))
                                       for n in range(2, LATER + 2)))
        await finishing
        assert any(call.error == "ratelimited" for call in slack.calls_to("chat.postMessage"))
        replies = slack.thread(CHANNEL, first.ts)
        assert [reply.text for reply in replies] == [f"h1 check {n}: pass" for n in range(1, REPLIES + 1)]
        verdict_at = slack.message(CHANNEL, first.ts).edits[-1].at
        assert verdict_at < replies[-1].posted_at, "the verdict waited for its evidence replies"
        parents_at = max(slack.message(CHANNEL, thread.ts).posted_at for thread in later)
        before = [reply.text for reply in replies if reply.posted_at < parents_at]
        # the one being sent when they came, and the one Slack asked to wait for, at most
        assert len(before) <= 2, f"the later parents waited behind {before}"
        for thread in later:
            await thread.finish(message("done"))


def limited() -> SlackApiError:
    response = AsyncSlackResponse(client=None, http_verb="POST", api_url="chat.update", req_args={},  # type: ignore[arg-type]
                                  data={"ok": False, "error": "ratelimited"}, headers={"Retry-After": "1"},
                                  status_code=429)
    return SlackApiError("ratelimited", response)


async def test_a_429_holds_every_edit_and_progress_never_takes_a_verdicts_turn() -> None:
    edits = ParentEdits()
    sent: list[str] = []

    async def edit(what: str) -> None:
        sent.append(what)

    async def refused() -> None:
        raise limited()

    assert not await edits.progress(refused)  # Slack said wait: every edit now waits the Retry-After
    assert not await edits.progress(lambda: edit("progress while held"))
    verdict = asyncio.create_task(edits.verdict(lambda: edit("verdict")))
    await asyncio.sleep(0)
    assert not await edits.progress(lambda: edit("progress while a verdict waits"))
    await verdict
    assert sent == ["verdict"]
    edits = ParentEdits()  # a minute's share of progress, then no more
    for n in range(outbox.PROGRESS_PER_MINUTE + 1):
        await edits.progress(lambda n=n: edit(f"progress {n}"))
    assert sent[-1] == f"progress {outbox.PROGRESS_PER_MINUTE - 1}", "more progress edits than a minute's share"
