"""Tier 1: the restart check of the watch's last message (bot/slack/watch_resend.py) against the strict fake Slack: a
run recorded but never posted is posted once with its key, found the next time; the quiet hours' digest released by
the last run too; a channel history Slack will not show is said in the message posted. Runs are recorded results
(no SSH) written by the watch's own audit writer; the real-serve SIGKILL case is tests/test_watch_kill.py."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.watch import post_announcement
from bot.slack.watch_resend import RESENT, last_said, resend_unconfirmed
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.watch.audit import WatchAudit
from commands.watch.schedule import Watch
from tests.slack_fake.records import manifest_bot_scopes
from tests.slack_fake.server import FakeSlack
from tests.test_watch_home import _nothing
from tests.watch_rig import RecordedFleet, SimulatedClock

CHANNEL = "C0WATCH"


def _inventory(quiet: str | None = None) -> Any:
    entry: dict[str, Any] = {"target": "gpu", "every": "5m", "channel": CHANNEL, "after": 1, "jitter": "0s"}
    if quiet:
        entry["quiet"] = quiet
    return parse_inventory(yaml.safe_dump({"hosts": {"gpu1": {"address": "127.0.0.1", "port": 9}},
                                           "groups": {"gpu": ["gpu1"]}, "watch": [entry]}), "inventory.yml")


async def _recorded_not_posted(tmp_path: Path, quiet: str | None, *moments: datetime) -> tuple[Any, AuditStore]:
    """The watch's runs at ``moments`` (gpu1 failing), recorded as serve records them, their posts lost."""
    inventory = _inventory(quiet)
    audit = AuditStore.open(tmp_path / "audit.db")
    clock = SimulatedClock(moments[0])
    watch = Watch(inventory.watch, RecordedFleet(["gpu1"], lambda run: {"gpu1"}), _nothing, clock=clock,
                  on_run=WatchAudit(audit, inventory, Origin("proofbot:watch", "slack")).record)
    for moment in moments:
        clock.current = moment
        await watch.run_once()
    return inventory, audit


async def _resend(slack: FakeSlack, inventory: Any, audit: AuditStore) -> None:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    said = await last_said(audit, inventory.watch)
    await resend_unconfirmed(inventory.watch, said, client, partial(post_announcement, client))


def _parents(slack: FakeSlack) -> list[str]:
    return [message.text for message in slack.messages_in(CHANNEL) if not message.is_reply]


async def test_a_change_recorded_and_never_posted_is_posted_once_then_found(tmp_path: Path) -> None:
    inventory, audit = await _recorded_not_posted(tmp_path, None, datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    try:
        async with FakeSlack(channels={CHANNEL: "watch"}) as slack:
            slack.rate_limits.set("conversations.history", 5, 60)  # two restarts within the minute
            await _resend(slack, inventory, audit)
            assert _parents(slack) == ["watch gpu: 1 host now failing"]
            assert RESENT in str(slack.messages_in(CHANNEL)[0].blocks)
            await _resend(slack, inventory, audit)  # the next restart finds it by its key
            assert _parents(slack) == ["watch gpu: 1 host now failing"]
    finally:
        audit.close()


async def test_the_quiet_hours_digest_released_by_the_last_run_is_posted_once(tmp_path: Path) -> None:
    inventory, audit = await _recorded_not_posted(tmp_path, "11:00-12:30 UTC", datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
                                                  datetime(2026, 12, 1, 12, 40, tzinfo=UTC))
    try:
        async with FakeSlack(channels={CHANNEL: "watch"}) as slack:
            await _resend(slack, inventory, audit)
            [digest] = _parents(slack)
            assert "quiet hours" in digest, digest
    finally:
        audit.close()


async def test_a_history_slack_will_not_show_is_said_in_the_message_posted(tmp_path: Path) -> None:
    inventory, audit = await _recorded_not_posted(tmp_path, None, datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    scopes = [scope for scope in manifest_bot_scopes() if not scope.endswith(":history")]
    try:
        async with FakeSlack(channels={CHANNEL: "watch"}, scopes=scopes) as slack:
            await _resend(slack, inventory, audit)
            [message] = slack.messages_in(CHANNEL)
            assert "could not read this channel's history" in str(message.blocks) and "missing_scope" in str(
                message.blocks)
    finally:
        audit.close()
