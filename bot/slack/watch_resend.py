"""After a restart, the watch's last message that may never have reached Slack: the watch records a run before it
posts (commands/watch/schedule.py), so a serve killed between the two left a change in the log and nothing in the
channel. Each message carries its key (message metadata: the run's operation id); the next serve looks for that key
in the channel's history and posts the message only when it is not there. Never said twice, never lost."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from commands.inventory.watch import WatchEntry
from commands.store.db import AuditStore
from commands.verify.fleet import FleetResult
from commands.vocabulary import Change, EventKind, Operation
from commands.watch.memory import change_of, result_of_json
from commands.watch.state import Announcement, HostChange

if TYPE_CHECKING:
    from commands.store.handle import Db

log = logging.getLogger(__name__)
SAID_EVENT = "proofbot_watch_said"
# A run's message is posted within this long of its record (SAY_GRACE_S, Slack's 429 retries): its history window.
POSTED_WITHIN_S = 120
HISTORY_LIMIT = 15  # conversations.history's most a call for apps outside the Marketplace (one call a minute)
RUNS_READ = 500  # the newest watch-run events read for each target's last two
RESENT = ("proofbot restarted between recording this change and posting it: posted now, once "
          "(the evidence is in the audit log under the run's operation)")
UNCHECKED = ("proofbot restarted between recording this change and posting it, and could not read this channel's "
             "history to see whether it was posted ({error}): if it is above, this is the same change")

PostAnnouncement = Callable[[WatchEntry, Announcement, FleetResult, str | None], Awaitable[None]]


def said_key(run_operation_id: str, digest: bool) -> dict[str, Any]:
    """The message metadata a watch message carries: which run said it, and whether it is the quiet hours' digest."""
    return {"event_type": SAID_EVENT, "event_payload": {"run": run_operation_id, "digest": digest}}


@dataclass(frozen=True)
class LastSaid:
    """An entry's last run that said something: its operation, when, and what it said."""

    run_operation_id: str
    at: datetime
    announcements: list[Announcement]


async def last_said(audit: AuditStore, entries: Sequence[WatchEntry]) -> dict[str, LastSaid]:
    """Each entry's last run, when it said something: read before the watch runs again (a new run would hide it)."""
    return await audit.snapshot(lambda db: _last_said(db, [entry.target for entry in entries]))


async def resend_unconfirmed(entries: Sequence[WatchEntry], said: Mapping[str, LastSaid], client: AsyncWebClient,
                             post: PostAnnouncement) -> None:
    """For each entry whose last run said something (``last_said``), that message posted unless the channel
    already has it."""
    for entry in entries:
        last = said.get(entry.target)
        if last is None:
            continue
        note = RESENT
        try:
            found = await _keys_in_history(client, entry.channel, last.at)
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            log.warning("watch %s: the history of %s could not be read (%s): its last message is posted again, "
                        "said so", entry.target, entry.channel, error)
            found, note = set(), UNCHECKED.format(error=error)
        for announcement in last.announcements:
            if (last.run_operation_id, announcement.digest) in found:
                continue
            log.warning("watch %s: run %s's message never reached Slack: posted now", entry.target,
                        last.run_operation_id)
            fleet = FleetResult(last.run_operation_id, Operation.VERIFY, entry.target, last.at.isoformat(), 0.0, [])
            await post(entry, announcement, fleet, note)


async def _keys_in_history(client: AsyncWebClient, channel: str, at: datetime) -> set[tuple[str, bool]]:
    """The watch keys of the channel's messages posted from ``at`` to ``POSTED_WITHIN_S`` after (one call)."""
    page = await client.conversations_history(channel=channel, oldest=f"{at.timestamp() - 1:.6f}",
                                              latest=f"{at.timestamp() + POSTED_WITHIN_S:.6f}", limit=HISTORY_LIMIT,
                                              include_all_metadata=True)
    keys: set[tuple[str, bool]] = set()
    for message in page.get("messages") or []:
        metadata = message.get("metadata") or {}
        payload = metadata.get("event_payload") or {}
        if metadata.get("event_type") == SAID_EVENT and payload.get("run"):
            keys.add((str(payload["run"]), bool(payload.get("digest"))))
    return keys


def _last_said(db: Db, targets: list[str]) -> dict[str, LastSaid]:
    """Each target's last run, when it said something: its changes not held for the quiet hours (from its
    ``watch-change`` events), and the digest it released (the run before it held one, this one none)."""
    runs: dict[str, list[tuple[str, str, Mapping[str, Any]]]] = {}
    for row in db.query("SELECT operation_id, at, details FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?",
                        [EventKind.WATCH_RUN, RUNS_READ]):
        details = json.loads(row["details"])
        target = details.get("target")
        if target in targets and len(runs.setdefault(target, [])) < 2:
            runs[target].append((str(row["operation_id"]), str(row["at"]), details))
    said: dict[str, LastSaid] = {}
    for target, ((operation_id, at, run), *before) in runs.items():
        announcements: list[Announcement] = []
        if before and before[0][2].get("digest") and not run.get("digest"):
            announcements.append(Announcement(target, tuple(change_of(c) for c in before[0][2]["digest"]), True))
        held = set(run.get("held") or ())
        changes = [_change(row["host"], json.loads(row["details"])) for row in db.query(
            "SELECT host, details FROM events WHERE kind = ? AND operation_id = ? ORDER BY id",
            [EventKind.WATCH_CHANGE, operation_id]) if row["host"] not in held]
        if changes:
            announcements.append(Announcement(target, tuple(changes)))
        if announcements:
            said[target] = LastSaid(operation_id, datetime.fromisoformat(at.replace("Z", "+00:00")), announcements)
    return said


def _change(host: str, written: Mapping[str, Any]) -> HostChange:
    return HostChange(host, Change(written["change"]), None, result_of_json(written),
                      datetime.fromisoformat(str(written["since"]).replace("Z", "+00:00")))
