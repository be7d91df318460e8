"""Tier 1: ``serve`` runs the inventory's watch: a broken loopback host is said in the entry's channel (with its
evidence in the thread), SIGTERM stops the watch with the bot, cleanly (no unretrieved task exception), and a
restarted serve takes up each host's state from the audit log: the known failure is not said again."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from bot.demo.host import DemoHost
from commands.vocabulary import EventKind
from tests.lab.waits import until
from tests.serve_rig import free_port, gone, start_serve, stop_serve, stopped_cleanly
from tests.slack_fake.server import FakeSlack
from tests.watch_rig import watch_inventory


def _watch_runs(db: Path) -> int:
    if not db.exists():
        return 0
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM events WHERE kind = ?", (EventKind.WATCH_RUN,)).fetchone()[0])


async def _serve_until(slack: FakeSlack, inventory: str, db: Path, done: Callable[[], bool], what: str) -> str:
    """Start ``proofbot serve`` as users do, wait for ``done``, stop it with SIGTERM; its stderr."""
    bot = await start_serve(slack, inventory, db, await free_port())
    try:
        await until(what, done, 60)
    except AssertionError:
        raise AssertionError(f"{what}: serve said\n{(await stop_serve(bot))[-3000:]}") from None
    except BaseException:
        await gone(bot)
        raise
    return await stopped_cleanly(bot)


async def test_serve_posts_a_watched_hosts_failure_stops_cleanly_and_after_a_restart_says_nothing_known(
        seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> None:
    inventory = watch_inventory(tmp_path, {"gpu": [("ct129", seeded_host), ("ct130", clean_host)]}, [
        {"target": "gpu", "every": "1h", "channel": "C0WATCH", "after": 1, "jitter": "0s"}])
    db = tmp_path / "audit.db"
    async with FakeSlack(channels={"C0WATCH": "watch", "C0OPS": "ops"}) as slack:
        def parents() -> list[str]:
            return [message.ts for message in slack.messages_in("C0WATCH") if not message.is_reply]

        await _serve_until(slack, inventory.path, db, lambda: bool(parents()) and bool(
            slack.thread("C0WATCH", parents()[0])) and _watch_runs(db) == 1,
            "the watch's first message, its evidence in the thread, its run in the log")
        (parent,) = [message for message in slack.messages_in("C0WATCH") if not message.is_reply]
        assert parent.text == "watch gpu: 1 host now failing"
        assert [reply.text for reply in slack.thread("C0WATCH", parent.ts)] == ["Group 1 of 1: FAIL on 1 host"]
        # a new serve on the same audit log: its first run sees ct129 failing as before, and says nothing
        await _serve_until(slack, inventory.path, db, lambda: _watch_runs(db) >= 2, "the restarted watch's run")
        assert parents() == [parent.ts]
