"""What Slack users see without typing a command: the App Home and the welcome when invited to a channel.

The Home tab shows every host's last verdict (``commands.store.trail.last_per_host``), rendered by
``bot.slack.home_blocks.home_view``, each to members of the channel it ran in (``conversations.members``).
Whoever opened it is remembered (a bounded set) and their Home is published again when an operation is asked
for, approved (its host's lock taken) or ends, or the watch runs: one cheap lookup a second notices the newest
of those events (from Slack, the CLI or the watch on the same database), so a restart in progress and a
watch's change, recovery or "changing" host show without waiting for an operation to end. Bounded: a burst of
events is published a poll after its last (at most ``HOME_SETTLE_MAX_S`` after its first), each user at most
once per ``HOME_MIN_INTERVAL_S``, all users together within views.publish's tier
(``HOME_PUBLISHES_PER_MINUTE``; the rest at a later poll).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.home_blocks import HOME_BLOCK_LIMIT, NOT_YOURS, home_outside_view, home_view, join_help_message
from bot.slack.home_watch import watch_home_blocks
from bot.slack.listening import Body, BotContext
from bot.slack.policies import policy_blocks
from bot.slack.posting import post
from commands.clock import utc_now
from commands.store.db import AuditStore
from commands.store.trail import last_per_host
from commands.vocabulary import EventKind

log = logging.getLogger("proofbot.slack")

HOME_VIEWERS_MAX = 500  # users whose Home is kept fresh; the least recently seen is dropped
HOME_POLL_S = 1.0
HOME_MIN_INTERVAL_S = 3.0
HOME_SETTLE_MAX_S = 5.0  # a burst of events is published a poll after its last, or this long after its first
HOME_PUBLISHES_PER_MINUTE = 90  # every user's together: under views.publish's Tier 4 (100 a minute)
# The events after which a Home may read differently: an operation asked for or approved (a host's lock taken: "IN
# PROGRESS"), ended however it ended, a watch run (its states, "changing").
HOME_EVENTS = (EventKind.REQUESTED, EventKind.APPROVED, EventKind.REJECTED, EventKind.EXPIRED, EventKind.CANCELLED,
               EventKind.INTERRUPTED, EventKind.FINISHED, EventKind.WATCH_RUN)
MEMBERS_TTL_S = 30.0  # how long a channel's members are trusted: a user removed from it sees it this long at most
MEMBERS_PAGES_MAX = 20  # of 1000 members each
MEMBERS_CHANNELS_MAX = 1000


@dataclass
class _Viewer:
    published_at: float  # time.monotonic()
    seen: int  # the newest of HOME_EVENTS their Home showed


@dataclass
class Members:
    """Who is in a channel (``conversations.members``), cached ``MEMBERS_TTL_S``; a channel that could not be
    read counts as having nobody in it (fail closed), until it is asked again."""

    cached: OrderedDict[str, tuple[float, frozenset[str]]] = field(default_factory=OrderedDict)
    unreadable: dict[str, str] = field(default_factory=dict)  # channel -> Slack's error, while it lasts

    async def of(self, client: AsyncWebClient, channel: str) -> frozenset[str]:
        hit = self.cached.get(channel)
        if hit is not None and time.monotonic() - hit[0] < MEMBERS_TTL_S:
            return hit[1]
        members, error = await _read_members(client, channel)
        if error is None:
            self.unreadable.pop(channel, None)
        else:
            self.unreadable[channel] = error
        self.cached[channel] = (time.monotonic(), members)
        self.cached.move_to_end(channel)
        while len(self.cached) > MEMBERS_CHANNELS_MAX:
            self.cached.popitem(last=False)
        return members


async def _read_members(client: AsyncWebClient, channel: str) -> tuple[frozenset[str], str | None]:
    members: set[str] = set()
    cursor = ""
    try:
        for _ in range(MEMBERS_PAGES_MAX):  # past this, the members not read do not see it: closed, not open
            page = await client.conversations_members(channel=channel, limit=1000, cursor=cursor or None)
            members.update(str(member) for member in page.get("members") or [])
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                break
    except SlackApiError as exc:
        error = str(exc.response.get("error"))
        log.warning("members of %s could not be read (%s): its operations are shown to nobody", channel, error)
        return frozenset(), error
    return frozenset(members), None


@dataclass
class HomeState:
    viewers: OrderedDict[str, _Viewer] = field(default_factory=OrderedDict)
    workspace_url: str | None = None
    refresher: asyncio.Task[None] | None = None
    members: Members = field(default_factory=Members)
    published: deque[float] = field(default_factory=deque)  # time.monotonic() of each publish in the last minute

    def budget(self, now: float) -> int:
        """Publishes still allowed in the sliding minute (HOME_PUBLISHES_PER_MINUTE)."""
        while self.published and now - self.published[0] >= 60.0:
            self.published.popleft()
        return HOME_PUBLISHES_PER_MINUTE - len(self.published)


async def on_home_opened(context: BotContext, home: HomeState, event: Body, client: AsyncWebClient) -> None:
    if event.get("tab", "home") != "home":
        return
    user = str(event["user"])
    await publish(context, home, client, user)
    if home.refresher is None or home.refresher.done():
        home.refresher = context.keep(asyncio.create_task(_refresh(context, home, client)))


async def publish(context: BotContext, home: HomeState, client: AsyncWebClient, user: str) -> None:
    seen = await last_home_event_id(context.audit)
    if home.workspace_url is None:
        home.workspace_url = str((await client.auth_test()).get("url") or "") or None
    view = await _view_for(context, home, client, user)
    home.published.append(time.monotonic())
    await client.views_publish(user_id=user, view=view)
    home.viewers[user] = _Viewer(time.monotonic(), seen)
    home.viewers.move_to_end(user)
    while len(home.viewers) > HOME_VIEWERS_MAX:
        home.viewers.popitem(last=False)


async def _view_for(context: BotContext, home: HomeState, client: AsyncWebClient, user: str) -> dict[str, Any]:
    """What this viewer may see: a host's last operation when it ran in a channel proofbot works in that
    they are a member of (or came from the CLI, to a member of any such channel); other hosts' last
    operations are said to be elsewhere, without verdict, requester or thread. Fails closed."""
    allowed = context.inventory.channels
    last = await last_per_host(context.audit)
    channels = {record.channel for record in last.values() if record.channel} | set(allowed or ())
    mine: set[str] = set()
    for channel in sorted(channels):
        if (allowed is None or channel in allowed) and user in await home.members.of(client, channel):
            mine.add(channel)
    if allowed is not None and not mine:
        unreadable = {c: e for c, e in home.members.unreadable.items() if c in allowed}
        return home_outside_view(allowed, utc_now(), unreadable)
    visible = {host: record for host, record in last.items() if record.channel in mine or not record.channel}
    hidden = frozenset(last) - frozenset(visible)
    scope = "shown: the last operation of each host run in a channel you are in, or from the CLI" + (
        f"; {len(hidden)} hosts' last operation ran {NOT_YOURS}" if hidden else "")

    async def can_see(channel: str) -> bool:
        return channel in mine or user in await home.members.of(client, channel)

    # the watch's entries this viewer may see (their channel's members) after the hosts, room kept for them
    watched = await watch_home_blocks(context.inventory, context.audit, can_see)
    view = home_view(sorted(context.inventory.hosts), context.inventory.groups, visible, home.workspace_url,
                     utc_now(), hidden, scope, limit=HOME_BLOCK_LIMIT - len(watched))
    view["blocks"] += watched
    room = HOME_BLOCK_LIMIT - len(view["blocks"])  # the policies after the hosts, as far as Slack's limit allows
    view["blocks"] += (await policy_blocks(context, client, can_see))[:room] if room > 2 else []
    return view


async def last_home_event_id(store: AuditStore) -> int:
    """The id of the newest of ``HOME_EVENTS`` (0: none yet): the table read backwards by id to the first of them,
    a few rows (they are most of what is written), never a scan of one kind's every event."""
    marks = ", ".join("?" for _ in HOME_EVENTS)
    row = await store.snapshot(lambda db: next(iter(db.query(
        f"SELECT id FROM events WHERE kind IN ({marks}) ORDER BY id DESC LIMIT 1", list(HOME_EVENTS))), {}))
    return int(row.get("id") or 0)


async def _refresh(context: BotContext, home: HomeState, client: AsyncWebClient) -> None:
    """Publish again to every remembered viewer whose Home is older than the newest of ``HOME_EVENTS``, once the
    events have settled, within the per-user interval and the workspace's budget."""
    last, burst_since = 0, None  # the newest event seen, and since when events keep coming
    while True:
        await asyncio.sleep(HOME_POLL_S)
        newest = await last_home_event_id(context.audit)
        now = time.monotonic()
        if newest != last:  # still being written (a run's trail, its watch-run last): wait for a quiet poll
            last, burst_since = newest, burst_since if burst_since is not None else now
            if now - burst_since < HOME_SETTLE_MAX_S:
                continue
        burst_since = None
        for user, viewer in list(home.viewers.items()):
            if home.budget(now) <= 0:
                break  # the rest on a later poll: their Home is still older than `newest`
            if viewer.seen < newest and now - viewer.published_at >= HOME_MIN_INTERVAL_S:
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
    await post(client, channel, text, blocks)
