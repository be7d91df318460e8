"""Tier 1: a watch message Slack refuses (a channel the bot is not in) is logged and the watch goes on; the next
message, to a channel it is in, is posted with its headline and a line per host (the host's result here has no
checks: a could-not-check, whose reply in the thread is not what this test is about)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.watch import slack_poster
from commands.inventory.watch import WatchEntry
from commands.operation import OperationResult
from commands.verify.fleet import FleetResult
from commands.vocabulary import Change, Operation, Verdict
from commands.watch.state import Announcement, HostChange, Result
from tests.slack_fake.server import FakeSlack

SINCE = datetime(2026, 12, 1, 12, 10, tzinfo=UTC)


async def test_a_refused_message_is_logged_and_the_next_is_posted(caplog: pytest.LogCaptureFixture) -> None:
    recovered = Announcement("gpu", (HostChange("ct129", Change.RECOVERED, Result(Verdict.FAIL, frozenset({"x"})),
                                                Result(Verdict.PASS), SINCE),))
    fleet = FleetResult("op-fleet", Operation.VERIFY, "gpu", "2026-12-01T12:10:00Z", 1.0,
                        [OperationResult("op-1", Operation.VERIFY, "ct129", "2026-12-01T12:10:00Z", 1.0, [])])
    async with FakeSlack(channels={"C0WATCH": "watch"}) as slack:
        post = slack_poster(AsyncWebClient(token=slack.bot_token, base_url=slack.api_url))
        with caplog.at_level(logging.ERROR, logger="bot.slack.watch"):
            await post(WatchEntry(target="gpu", every="5m", channel="C0GONE"), recovered, fleet)
        await post(WatchEntry(target="gpu", every="5m", channel="C0WATCH"), recovered, fleet)
        (message,) = [message for message in slack.messages_in("C0WATCH") if not message.is_reply]
    assert "watch gpu: Slack refused the message to C0GONE: channel_not_found" in caplog.text
    assert message.text == "watch gpu: 1 host recovered"
    assert message.blocks is not None and "*ct129* recovered since" in str(message.blocks)
