"""serve's Slack session (bot/slack/session.py) against the fake, which numbers the TCP connections calls come
over: calls reuse kept-alive connections (slack_sdk alone opens one per call), never more than SLACK_CONNECTIONS at
once however many calls are in flight, the app's clients (bolt's per-request ones too) share them, and leaving the
session closes every one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.app import build_app
from bot.slack.listening import BotContext
from bot.slack.redacting import RedactingWebClient
from bot.slack.session import SLACK_CONNECTIONS, slack_session
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack

CHANNEL = "C0OPS"
IN_TURN = 20
AT_ONCE = 3 * SLACK_CONNECTIONS


async def test_calls_in_turn_go_over_one_connection_and_leaving_closes_it() -> None:
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        async with slack_session() as session:
            client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url, session=session)
            for _ in range(IN_TURN):
                await client.auth_test()
            assert slack.connections == 1, [call.connection for call in slack.calls]
            assert slack.open_connections == 1
        await until("the session's connection closed", lambda: slack.open_connections == 0, 10)


async def test_calls_at_once_share_at_most_the_limit_of_connections() -> None:
    """Three times as many calls at once as the limit: all answered, over at most SLACK_CONNECTIONS."""
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack, slack_session() as session:
        slack.rate_limits.enabled = False  # the connections are counted here, not Slack's pace
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url, session=session)
        answers = await asyncio.gather(*(client.chat_postMessage(channel=CHANNEL, text=f"message {n}")
                                         for n in range(AT_ONCE)))
        assert all(answer["ok"] for answer in answers)
        assert 1 <= slack.connections <= SLACK_CONNECTIONS, slack.connections


async def test_without_the_session_each_call_opens_a_connection() -> None:
    """What serve did before it had a session (and what any client made without one still does)."""
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)
        for _ in range(IN_TURN):
            await client.auth_test()
        assert slack.connections == IN_TURN


async def test_the_apps_clients_share_its_session(tmp_path: Path) -> None:
    """The app's client, bolt's per-request copy of it and the redacting copy a listener is given all call over
    the session serve made: one connection for all of them, in turn."""
    inventory = parse_inventory("hosts: {ct129: {address: 127.0.0.1}}\n", "inventory.yml")
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack, slack_session() as session:
        audit = await asyncio.to_thread(AuditStore.open, tmp_path / "audit.db")
        try:
            app = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, api_url=slack.api_url,
                            session=session)
            per_request = AsyncWebClient(token=slack.bot_token, base_url=app.client.base_url,
                                         session=app.client.session)  # as bolt makes one for each request
            for client in (app.client, per_request, RedactingWebClient.like(per_request)):
                await client.auth_test()
        finally:
            audit.close()
        assert app.client.session is session
        assert slack.connections == 1, [call.connection for call in slack.calls]
