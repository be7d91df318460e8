"""Tier 1: ``serve`` runs the inventory's watch: a broken loopback host is said in the entry's channel (with its
evidence in the thread), and SIGTERM stops the watch with the bot, cleanly (no unretrieved task exception)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from bot.demo.host import DemoHost
from tests.conftest import REPO
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.test_serve_live_holders import free_port
from tests.watch_rig import watch_inventory


async def test_serve_posts_a_watched_hosts_failure_and_stops_cleanly(seeded_host: DemoHost, clean_host: DemoHost,
                                                                     tmp_path: Path) -> None:
    inventory = watch_inventory(tmp_path, {"gpu": [("ct129", seeded_host), ("ct130", clean_host)]}, [
        {"target": "gpu", "every": "1h", "channel": "C0WATCH", "after": 1, "jitter": "0s"}])
    async with FakeSlack(channels={"C0WATCH": "watch", "C0OPS": "ops"}) as slack:
        env = {**os.environ, "SLACK_BOT_TOKEN": slack.bot_token, "SLACK_SIGNING_SECRET": "s",
               "PROOFBOT_SLACK_API_URL": slack.api_url}
        bot = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "serve", "--http", str(await free_port()), "--host", "127.0.0.1",
            "--inventory", inventory.path, "--db", str(tmp_path / "audit.db"), cwd=REPO, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            await until("the watch's first message", lambda: any(
                not message.is_reply for message in slack.messages_in("C0WATCH")), 60)
            parent = next(message for message in slack.messages_in("C0WATCH") if not message.is_reply)
            await until("its evidence in the thread", lambda: bool(slack.thread("C0WATCH", parent.ts)), 30)
            bot.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(bot.communicate(), 60)
        finally:
            if bot.returncode is None:
                bot.kill()
                await bot.wait()
    assert bot.returncode == 0, err.decode()
    assert parent.text == "watch gpu: 1 host now failing"
    assert [reply.text for reply in slack.thread("C0WATCH", parent.ts)] == ["Group 1 of 1: FAIL on 1 host"]
    assert "never retrieved" not in err.decode() and "Traceback" not in err.decode(), err.decode()
