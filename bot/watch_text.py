"""The watch's words (both front-ends): each kind of change, and one announcement as a headline and a line
per host that changed with it."""

from __future__ import annotations

from collections import Counter

from bot.words import final_text, plural
from commands.vocabulary import Change
from commands.watch.state import Announcement, HostChange

CHANGE_WORDS: dict[str, str] = {Change.FAILED: "now failing", Change.NEW_CAUSE: "failing for a new reason",
                                Change.RECOVERED: "recovered", Change.UNCHECKABLE: "could not be checked"}
# A digest's host whose changes in the quiet hours are told as one line: "failed at X, recovered at Y".
CHANGE_DONE: dict[str, str] = {Change.FAILED: "failed", Change.NEW_CAUSE: "failed for a new reason",
                               Change.RECOVERED: "recovered", Change.UNCHECKABLE: "could not be checked"}
HOSTS_SHOWN = 50  # one message for a whole group stays readable: the rest are counted


def headline(announcement: Announcement) -> str:
    """``watch gpu: 20 hosts now failing`` (each kind counted, the worst first)."""
    counts = Counter(change.change for change in announcement.changes)
    parts = [f"{plural(counts[kind], 'host')} {CHANGE_WORDS[kind]}" for kind in Change if counts[kind]]
    held = " (held through quiet hours)" if announcement.digest else ""
    return f"watch {announcement.target}{held}: " + ", ".join(parts)


def host_line(change: HostChange) -> str:
    """``ct129 now failing since 2026-12-01 12:10 UTC: file:spec_info.py``; a digest's host that changed more
    than once in the quiet hours: ``ct129 failed at … (file:spec_info.py), recovered at …``."""
    causes = ", ".join(sorted(change.now.causes))
    if change.earlier:
        return f"{change.host} " + ", ".join(f"{CHANGE_DONE[step.change]} at {step.since:%Y-%m-%d %H:%M UTC}" + (
            f" ({', '.join(sorted(step.now.causes))})" if step.now.causes else "")
            for step in (*change.earlier, change))
    since = change.since.strftime("%Y-%m-%d %H:%M UTC")
    return f"{change.host} {CHANGE_WORDS[change.change]} since {since}" + (f": {causes}" if causes else "")


@final_text
def announcement_text(announcement: Announcement) -> str:
    shown = [host_line(change) for change in announcement.changes[:HOSTS_SHOWN]]
    more = len(announcement.changes) - len(shown)
    return "\n".join([headline(announcement), *shown, *([f"… and {plural(more, 'more host')}"] if more else [])])
