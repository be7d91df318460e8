"""``serve`` stops on SIGTERM at any moment, even while Slack does not answer, and records
``bot-started`` only once Slack has accepted its token."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path

from tests.conftest import REPO, write_inventory
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.test_serve_live_holders import free_port, kinds


async def serve(api_url: str, token: str, tmp_path: Path) -> asyncio.subprocess.Process:
    inventory = write_inventory(tmp_path / "inventory.yml", {"hosts": {"ct1": {"address": "127.0.0.1"}}})
    env = {**os.environ, "SLACK_BOT_TOKEN": token, "SLACK_SIGNING_SECRET": "s", "PROOFBOT_SLACK_API_URL": api_url}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "serve", "--http", str(await free_port()), "--host", "127.0.0.1",
        "--inventory", str(inventory), "--db", str(tmp_path / "audit.db"), cwd=REPO, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def test_sigterm_stops_a_bot_that_slack_never_answers(tmp_path: Path) -> None:
    connections: list[asyncio.StreamWriter] = []

    async def black_hole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)  # accept, read nothing, answer nothing

    server = await asyncio.start_server(black_hole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    bot = await serve(f"http://127.0.0.1:{port}/api/", "xoxb-never-answered", tmp_path)
    try:
        await until("the bot to call Slack", lambda: bool(connections), 30)
        bot.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(bot.communicate(), 30)
    finally:
        if bot.returncode is None:
            bot.kill()
        server.close()
        for writer in connections:
            writer.close()
    assert bot.returncode == 0, err.decode()
    assert "bot-started" not in kinds(tmp_path / "audit.db")


async def test_a_refused_token_stops_before_anything_is_recorded(tmp_path: Path) -> None:
    async with FakeSlack(channels={"C0OPS": "ops"}) as slack:
        bot = await serve(slack.api_url, "xoxb-not-the-apps-token", tmp_path)
        _, err = await asyncio.wait_for(bot.communicate(), 60)
    assert bot.returncode == 2, err.decode()
    assert "Slack refused SLACK_BOT_TOKEN: invalid_auth" in err.decode()
    events = sqlite3.connect(tmp_path / "audit.db").execute("SELECT kind FROM events").fetchall()
    assert events == []
