"""``serve`` runs the watch: one task owned by serve's lifecycle (cancelled at shutdown, its failure logged by a
done-callback, never an unretrieved exception); each change posted to its entry's channel, the evidence of
the hosts not passing in its thread as /verify posts a fleet's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from functools import partial

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import context_block
from bot.slack.fleet_blocks import GROUP_REPLIES, group_reply_message
from bot.slack.listening import BotContext
from bot.slack.posting import post, post_later
from bot.slack.watch_blocks import watch_message
from bot.slack.watch_resend import LastSaid, last_said, resend_unconfirmed, said_key
from commands.fleet.grouping import group_outcomes
from commands.inventory.watch import WatchEntry
from commands.operation import Origin
from commands.verify.fleet import FleetResult
from commands.vocabulary import Outcome
from commands.watch.audit import WatchAudit
from commands.watch.fleet import fleet_verifier
from commands.watch.holds import LockHolds
from commands.watch.memory import restore_watch
from commands.watch.schedule import Clock, Post, SystemClock, Watch
from commands.watch.state import Announcement

log = logging.getLogger(__name__)
WATCH_ACTOR = "proofbot:watch"


def slack_poster(client: AsyncWebClient) -> Post:
    """The watch's ``post``: the change message, then a reply per group of changed hosts not passing (through the
    channel's outbox, with the /verify threads posting there)."""

    async def poster(entry: WatchEntry, announcement: Announcement, fleet: FleetResult) -> None:
        await post_announcement(client, entry, announcement, fleet)

    return poster


async def post_announcement(client: AsyncWebClient, entry: WatchEntry, announcement: Announcement,
                            fleet: FleetResult, note: str | None = None) -> None:
    """Post one announcement, keyed (message metadata: the run's operation id) so a restarted serve can find it
    in the channel's history; ``note`` is a line under it. Slack refusing it is logged, never stops the watch."""
    _test_only_sigkill(BEFORE_POST)
    try:
        await _post(client, entry, announcement, fleet, note)
        _test_only_sigkill(AFTER_POST)
    except SlackApiError as exc:  # one message Slack refused (a channel gone, no access) never stops the watch
        log.error("watch %s: Slack refused the message to %s: %s", entry.target, entry.channel,
                  exc.response.get("error"))


async def _post(client: AsyncWebClient, entry: WatchEntry, announcement: Announcement, fleet: FleetResult,
                note: str | None) -> None:
    text, blocks = watch_message(announcement, fleet)
    if note:
        blocks = [*blocks, context_block(note).to_dict()]
    metadata = said_key(fleet.operation_id, announcement.digest)
    posted = await post(client, entry.channel, text, blocks, metadata=metadata)
    changed = {change.host for change in announcement.changes}
    results = [result for result in fleet.results if result.host in changed]
    groups = await asyncio.to_thread(group_outcomes, results, {})
    failing = [group for group in groups if group.outcome != Outcome.PASS]
    by_host = {result.host: result for result in results}
    channel, ts = str(posted["channel"]), str(posted["ts"])
    replies = [post_later(client, channel, *group_reply_message(group, index, len(failing), by_host, False),
                          thread_ts=ts) for index, group in enumerate(failing[:GROUP_REPLIES], start=1)]
    refused = [exc for exc in await asyncio.gather(*replies, return_exceptions=True) if isinstance(exc, Exception)]
    if refused:  # every reply had its turn; the first refusal is logged
        raise refused[0]


# Tests only, inert unless set (never in production): SIGKILL this serve just before or after a watch message is
# posted, to prove a restart neither repeats nor loses it (tests/test_watch_kill.py).
TEST_ONLY_SIGKILL_ENV = "PROOFBOT_TEST_ONLY_SIGKILL_WATCH"
BEFORE_POST, AFTER_POST = "before-post", "after-post"


def _test_only_sigkill(point: str) -> None:
    if os.environ.get(TEST_ONLY_SIGKILL_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)


def start_watch(context: BotContext, client: AsyncWebClient, clock: Clock | None = None) -> asyncio.Task[None] | None:
    """The watch as a task (None when the inventory has no entries); the caller cancels it at shutdown."""
    inventory = context.inventory
    if not inventory.watch:
        return None
    origin = Origin(WATCH_ACTOR, "slack")
    watch = Watch(inventory.watch, fleet_verifier(inventory, None, origin), slack_poster(client),
                  clock=clock or SystemClock(), held_until=LockHolds(inventory, context.audit),
                  on_run=WatchAudit(context.audit, inventory, origin).record)
    task = asyncio.create_task(_restored_and_run(watch, context, client), name="proofbot-watch")
    task.add_done_callback(_logged)
    return task


async def _restored_and_run(watch: Watch, context: BotContext, client: AsyncWebClient) -> None:
    """Each host's state as the log left it (a restart re-alerts nothing known, forgets nothing pending), the last
    run's message posted if it never reached Slack, then on."""
    await restore_watch(watch, context.audit)
    said = await last_said(context.audit, watch.entries)  # before any new run is recorded over it
    resending = asyncio.create_task(_resend(watch, said, client), name="proofbot-watch-resend")
    try:  # beside the runs: a history call Slack paces (one a minute) never delays them
        await watch.run_forever()
    finally:
        resending.cancel()
        await asyncio.gather(resending, return_exceptions=True)


async def _resend(watch: Watch, said: Mapping[str, LastSaid], client: AsyncWebClient) -> None:
    try:
        await resend_unconfirmed(watch.entries, said, client, partial(post_announcement, client))
    except Exception as exc:  # a bug or the store: logged, the watch goes on
        log.error("watch: the last run's message could not be checked: %s", exc, exc_info=exc)


def _logged(task: asyncio.Task[None]) -> None:
    """A watch that ended by itself is a bug or an outage: said in the log, the exception retrieved."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("the watch stopped: %s", error, exc_info=error)


async def stop_watch(task: asyncio.Task[None] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):  # a failure was logged by _logged
        await task
