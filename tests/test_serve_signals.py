"""``serve`` stops on SIGTERM at any moment, even while Slack does not answer, and records
``bot-started`` only once Slack has accepted its token."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from tests.conftest import write_inventory
from tests.lab.waits import until
from tests.serve_rig import SIGNING_SECRET, Endpoint, SlackApi, free_port, kinds, start_serve, stop_serve
from tests.slack_fake.server import FakeSlack


async def serve(slack: SlackApi, tmp_path: Path) -> asyncio.subprocess.Process:
    inventory = write_inventory(tmp_path / "inventory.yml", {"hosts": {"ct1": {"address": "127.0.0.1"}}})
    return await start_serve(slack, inventory, tmp_path / "audit.db", await free_port(), secret=SIGNING_SECRET)


async def test_sigterm_stops_a_bot_that_slack_never_answers(tmp_path: Path) -> None:
    connections: list[asyncio.StreamWriter] = []

    async def black_hole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)  # accept, answer nothing; hang up once serve has (it is stopped below)
        try:
            await reader.read()
        finally:
            writer.close()  # also a connection accepted after the test's own closing loop ran: none is left open

    server = await asyncio.start_server(black_hole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    bot = await serve(Endpoint(f"http://127.0.0.1:{port}/api/", "xoxb-never-answered"), tmp_path)
    try:
        await until("the bot to call Slack", lambda: bool(connections), 30)
    finally:
        said = await stop_serve(bot, timeout_s=30)
        server.close()
        for writer in connections:
            writer.close()
    assert bot.returncode == 0, said
    assert "bot-started" not in kinds(tmp_path / "audit.db")


async def test_a_refused_token_stops_before_anything_is_recorded(tmp_path: Path) -> None:
    async with FakeSlack(channels={"C0OPS": "ops"}) as slack:
        bot = await serve(Endpoint(slack.api_url, "xoxb-not-the-apps-token"), tmp_path)
        said = await stop_serve(bot, signal_number=None)
    assert bot.returncode == 2, said
    assert "Slack refused SLACK_BOT_TOKEN: invalid_auth" in said
    events = sqlite3.connect(tmp_path / "audit.db").execute("SELECT kind FROM events").fetchall()
    assert events == []
