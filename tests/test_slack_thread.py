"""An operation's Slack thread against the strict fake: replies in order, the parent edited at most
every 2 s however often progress comes, and always its final verdict."""

from __future__ import annotations

import itertools

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
