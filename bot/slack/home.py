"""What Slack users see without typing a command: the App Home and the welcome when invited to a channel.

The Home tab shows every host's last verdict (``commands.store.trail.last_per_host``), rendered by
``bot.slack.blocks.home_view``. Whoever opened it is remembered (a bounded set) and their Home is
published again when an operation ends: one cheap index lookup a second notices the newest
``finished`` event (from Slack or the CLI on the same database), and each user gets at most one
publish per ``HOME_MIN_INTERVAL_S``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import home_view, join_help_message
from bot.slack.context import Body, BotContext
from commands.operation import utc_now
from commands.store.trail import last_finished_id, last_per_host

log = logging.getLogger("proofbot.slack")

HOME_VIEWERS_MAX = 500  # users whose Home is kept fresh; the least recently seen is dropped
HOME_POLL_S = 1.0
HOME_MIN_INTERVAL_S = 3.0


@dataclass
class _Viewer:
    published_at: float  # time.monotonic()
    seen_finished: int  # the newest finished event their Home showed


@dataclass
class HomeState:
    viewers: OrderedDict[str, _Viewer] = field(default_factory=OrderedDict)
    workspace_url: str | None = None
    refresher: asyncio.Task[None] | None = None


async def on_home_opened(context: BotContext, home: HomeState, event: Body, client: AsyncWebClient) -> None:
    if event.get("tab", "home") != "home":
        return
    user = str(event["user"])
    await publish(context, home, client, user)
    if home.refresher is None or home.refresher.done():
        home.refresher = asyncio.create_task(_refresh(context, home, client))
        context.timers.add(home.refresher)
        home.refresher.add_done_callback(context.timers.discard)


async def publish(context: BotContext, home: HomeState, client: AsyncWebClient, user: str) -> None:
    seen = await last_finished_id(context.audit)
    if home.workspace_url is None:
        home.workspace_url = str((await client.auth_test()).get("url") or "") or None
    view = home_view(sorted(context.inventory.hosts), context.inventory.groups, await last_per_host(context.audit),
                     home.workspace_url, utc_now())
    await client.views_publish(user_id=user, view=view)
    home.viewers[user] = _Viewer(time.monotonic(), seen)
    home.viewers.move_to_end(user)
    while len(home.viewers) > HOME_VIEWERS_MAX:
        home.viewers.popitem(last=False)


async def _refresh(context: BotContext, home: HomeState, client: AsyncWebClient) -> None:
    """Publish again to every remembered viewer whose Home is older than the newest finished operation."""
    while True:
        await asyncio.sleep(HOME_POLL_S)
        newest = await last_finished_id(context.audit)
        now = time.monotonic()
        for user, viewer in list(home.viewers.items()):
            if viewer.seen_finished < newest and now - viewer.published_at >= HOME_MIN_INTERVAL_S:
                try:
                    await publish(context, home, client, user)
                except SlackApiError as exc:  # one user's Home failing must not stop the others'
                    log.warning("App Home publish for %s failed: %s", user, exc.response.get("error"))


async def on_member_joined(context: BotContext, bot_user_id: str | None, event: Body,
                           client: AsyncWebClient) -> None:
    """When proofbot itself was added to a channel: one short message saying what it does there."""
    if not bot_user_id or event.get("user") != bot_user_id:
        return
    channel = str(event["channel"])
    text, blocks = join_help_message(context.inventory.approvals.approvers, context.inventory.channels, channel)
    await client.chat_postMessage(channel=channel, text=text, blocks=blocks)
