"""Tier 1: a real ``proofbot serve`` SIGKILLed around a watch message (its test-only hook, inert unless set) never
says the change twice and never loses it: the run is recorded before it is posted; killed before the post, the next
serve finds no message with the run's key in the channel's history and posts it once; killed right after, the next
serve finds it there and posts nothing."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from contextlib import closing
from pathlib import Path

from bot.demo.host import DemoHost
from bot.slack.watch import AFTER_POST, BEFORE_POST, TEST_ONLY_SIGKILL_ENV
from bot.slack.watch_resend import RESENT, SAID_EVENT
from commands.vocabulary import EventKind
from tests.lab.waits import until
from tests.serve_rig import free_port, start_serve, stop_serve
from tests.slack_fake.server import FakeSlack
from tests.watch_rig import watch_inventory

CHANNEL = "C0WATCH"


def _count(db: Path, kind: str) -> int:
    if not db.exists():
        return 0
    try:
        with closing(sqlite3.connect(db)) as conn:
            return int(conn.execute("SELECT count(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0])
    except sqlite3.OperationalError:  # the database is still being created
        return 0


async def _serve(slack: FakeSlack, inventory: str, db: Path, kill_at: str | None) -> asyncio.subprocess.Process:
    return await start_serve(slack, inventory, db, await free_port(), env={TEST_ONLY_SIGKILL_ENV: kill_at or ""},
                             stdout=asyncio.subprocess.DEVNULL)


async def _killed(bot: asyncio.subprocess.Process) -> str:
    """The hook's SIGKILL: serve's stderr once it died of it."""
    said = await stop_serve(bot, signal_number=None)
    assert bot.returncode == -signal.SIGKILL, said[-3000:]
    return said


async def test_a_serve_killed_before_or_after_posting_a_watch_change_says_it_exactly_once(
        seeded_host: DemoHost, tmp_path: Path) -> None:
    inventory = watch_inventory(tmp_path, {"gpu": [("ct129", seeded_host)]}, [
        {"target": "gpu", "every": "1h", "channel": CHANNEL, "after": 1, "jitter": "0s"}]).path
    db = tmp_path / "audit.db"
    async with FakeSlack(channels={CHANNEL: "watch"}) as slack:
        slack.rate_limits.set("conversations.history", 5, 60)  # two restarts within a minute: Slack's tier is 1

        def parents() -> list[str]:
            return [message.text for message in slack.messages_in(CHANNEL) if not message.is_reply]

        # 1. the failure is recorded, and serve dies before posting it: nothing in Slack yet
        await _killed(await _serve(slack, inventory, db, BEFORE_POST))
        assert _count(db, EventKind.WATCH_CHANGE) == 1 and parents() == []
        # 2. the next serve finds no message with the run's key: posts it, once; killed right after the post
        await _killed(await _serve(slack, inventory, db, AFTER_POST))
        assert parents() == ["watch gpu: 1 host now failing"]
        [parent] = [message for message in slack.messages_in(CHANNEL) if not message.is_reply]
        assert RESENT in str(parent.blocks) and parent.metadata is not None
        assert parent.metadata["event_type"] == SAID_EVENT
        # 3. the next serve finds it in the history: says nothing again (its own run: ct129 still failing, known).
        # Had serve 2 recorded a run of its own before its SIGKILL, that run said nothing: nothing to look up.
        runs = _count(db, EventKind.WATCH_RUN)
        bot = await _serve(slack, inventory, db, None)
        try:
            await until("the third serve's run and its look in the history", lambda: _count(
                db, EventKind.WATCH_RUN) > runs and (runs > 1 or len(slack.calls_to("conversations.history")) >= 2), 60)
        finally:
            said = await stop_serve(bot)
        assert bot.returncode == 0 and "Traceback" not in said, said
        assert parents() == ["watch gpu: 1 host now failing"]
        assert _count(db, EventKind.WATCH_CHANGE) == 1
