"""The watch's Block Kit: one message per change (every host that changed together), its hosts and since
when, and the Re-verify button of the run that saw it; the evidence follows in its thread as /verify's does."""

from __future__ import annotations

from datetime import datetime

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement

from bot.slack.blocks import SECTION_LIMIT, Message, as_dicts, context_block, escape, section_block
from bot.slack.thread_blocks import FLEET_REVERIFY
from bot.watch_text import CHANGE_DONE, CHANGE_WORDS, HOSTS_SHOWN, announcement_text, headline
from commands.verify.fleet import FleetResult
from commands.vocabulary import Change, Verdict
from commands.watch.state import Announcement, HostChange

CHANGE_EMOJI: dict[str, str] = {Change.FAILED: ":red_circle:", Change.NEW_CAUSE: ":red_circle:",
                                Change.RECOVERED: ":large_green_circle:", Change.UNCHECKABLE: ":large_yellow_circle:"}


def _when(moment: datetime) -> str:
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{moment:%Y-%m-%d %H:%M} UTC>"


def _causes(change: HostChange) -> str:
    return ", ".join(f"`{escape(cause)}`" for cause in sorted(change.now.causes))


def _host_line(change: HostChange) -> str:
    if change.earlier:  # a digest's host that changed more than once in the quiet hours: one line
        steps = ", ".join(f"{CHANGE_DONE[step.change]} at {_when(step.since)}"
                          + (f" ({_causes(step)})" if step.now.causes else "") for step in (*change.earlier, change))
        return f"{CHANGE_EMOJI[change.change]} *{escape(change.host)}* {steps}"
    causes = _causes(change)
    return (f"{CHANGE_EMOJI[change.change]} *{escape(change.host)}* {CHANGE_WORDS[change.change]} since "
            f"{_when(change.since)}" + (f": {causes}" if causes else ""))


def watch_message(announcement: Announcement, fleet: FleetResult) -> Message:
    """The parent: the headline, a line per host (the first ``HOSTS_SHOWN``), the run's operation and its button."""
    worst = max(announcement.changes, key=lambda change: change.change != Change.RECOVERED).change
    blocks: list[Block] = [section_block(f"{CHANGE_EMOJI[worst]} *{escape(headline(announcement))}*")]
    lines = [_host_line(change) for change in announcement.changes[:HOSTS_SHOWN]]
    chunk: list[str] = []
    for line in lines:  # sections of at most SECTION_LIMIT characters
        if chunk and sum(len(text) + 1 for text in chunk) + len(line) > SECTION_LIMIT - 100:
            blocks.append(section_block("\n".join(chunk)))
            chunk = []
        chunk.append(line)
    if chunk:
        blocks.append(section_block("\n".join(chunk)))
    if len(announcement.changes) > HOSTS_SHOWN:
        blocks.append(context_block(f"… and {len(announcement.changes) - HOSTS_SHOWN} more hosts"))
    failing = [change.host for change in announcement.changes if change.now.verdict != Verdict.PASS]
    where = "the evidence of each that is not passing is in this thread" if failing else "every host here passes"
    blocks.append(context_block(f"watch run: fleet operation `{fleet.operation_id}` · {where}"))
    if failing:
        blocks.append(ActionsBlock(elements=[ButtonElement(
            text="Re-verify the hosts not passing", action_id=FLEET_REVERIFY, value=fleet.operation_id,
            style="primary")]))
    return announcement_text(announcement).splitlines()[0], as_dicts(blocks)
