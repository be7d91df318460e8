"""The App Home's watch section: each watched host's current state and since when, for each ``watch`` entry whose
channel the viewer is in, read from the audit log (commands/watch/memory.py, so a cron's ``--once`` runs show
too). Bounded for Slack's 100 blocks: per entry its counts per state, the hosts not passing first, the passing
ones named only while few, then "and N more"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.slack.blocks import SECTION_LIMIT, context_block, escape, section_block, slack_date
from bot.words import counts_words, plural, verdict_word
from commands.clock import utc_at
from commands.inventory import Inventory
from commands.inventory.watch import WatchEntry
from commands.store.db import AuditStore
from commands.vocabulary import Verdict
from commands.watch.memory import Remembered, remembered

WATCH_HOME_BLOCKS = 30  # of the Home's 100: the last verdicts and the policies share the rest
PASSING_NAMED = 10  # per entry: past this many, passing hosts are counted, not named
NOT_YET = "not yet watched"
# The order hosts are listed in (what needs a look first) and each state's glyph.
ORDER = (Verdict.FAIL, Verdict.ERROR, "pending", Verdict.PASS, NOT_YET)
GLYPH = {Verdict.FAIL: ":red_circle:", Verdict.ERROR: ":large_yellow_circle:", "pending": ":hourglass_flowing_sand:",
         Verdict.PASS: ":large_green_circle:", NOT_YET: ":white_circle:"}


@dataclass(frozen=True)
class HostLine:
    host: str
    state: str  # one of ORDER
    text: str
    since: str = ""  # ISO, for the order within a state (the oldest first)


def _when(moment: datetime) -> str:
    return slack_date(utc_at(moment.timestamp()))


def host_lines(entry: WatchEntry, hosts: Sequence[str], memory: Remembered) -> list[HostLine]:
    """Each host of the entry as the watch last confirmed it, most urgent first."""
    lines: list[HostLine] = []
    for host in hosts:
        name = f"*{escape(host)}*"
        confirmed = memory.confirmed.get(host)
        pending = memory.pending.get(host)
        if confirmed is not None and confirmed[0].verdict != Verdict.PASS:
            result, since = confirmed
            causes = ", ".join(f"`{escape(cause)}`" for cause in sorted(result.causes))
            word = "failing" if result.verdict == Verdict.FAIL else "could not be checked"
            line = HostLine(host, result.verdict, f"{name} {word} since {_when(since)}" + (f": {causes}" if causes
                                                                                           else ""), since.isoformat())
        elif memory.last_run is None:
            line = HostLine(host, NOT_YET, f"{name} {NOT_YET}")
        else:
            began = confirmed[1] if confirmed is not None else memory.watching_since
            line = HostLine(host, Verdict.PASS, f"{name} passing" + (f" since {_when(began)}" if began else ""),
                            began.isoformat() if began else "")
        if pending is not None:  # a run of other results, not yet `after` long: said once it is
            seen = f"{verdict_word(str(pending['verdict']))} in the last {plural(int(pending['streak']), 'run')}"
            line = HostLine(host, "pending", f"{line.text}; {seen} (said after {entry.after})", line.since)
        lines.append(line)
    return sorted(lines, key=lambda line: (ORDER.index(line.state), line.since, line.host))


def _entry_head(entry: WatchEntry, lines: list[HostLine], memory: Remembered) -> str:
    counts = Counter(line.state for line in lines)
    words = {Verdict.FAIL: "failing", Verdict.ERROR: "could not be checked", "pending": "changing",
             Verdict.PASS: "passing", NOT_YET: NOT_YET}
    tally = " · ".join(f"{counts[state]} {words[state]}" for state in ORDER if counts[state])
    last = memory.last_run
    ran = (f"last run {slack_date(memory.last_run_at or '')}: {counts_words(last.get('counts') or {})}"
           if last is not None and memory.last_run_at else "no run yet")
    return (f"*{escape(entry.target)}* every {escape(entry.every)} → <#{entry.channel}> · {ran}\n"
            f"{GLYPH[lines[0].state] if lines else ''} {tally or 'no hosts'}")


def entry_blocks(entry: WatchEntry, hosts: Sequence[str], memory: Remembered, room: int) -> list[dict[str, Any]]:
    """One entry in at most ``room`` blocks (2 at least): its head, its hosts most urgent first, the rest counted."""
    lines = host_lines(entry, hosts, memory)
    blocks = [section_block(_entry_head(entry, lines, memory)).to_dict()]
    passing = [line for line in lines if line.state == Verdict.PASS]
    named = [line for line in lines if line.state != Verdict.PASS or len(passing) <= PASSING_NAMED]
    sections: list[list[str]] = []
    for line in named:
        text = f"{GLYPH[line.state]} {line.text}"
        if not sections or len("\n".join([*sections[-1], text])) > SECTION_LIMIT - 100:
            sections.append([])
        sections[-1].append(text)
    shown = sections[:max(0, room - 2)]  # the head, and a line saying what is not shown
    listed = sum(len(section) for section in shown)
    blocks += [section_block("\n".join(section)).to_dict() for section in shown]
    listed_hosts = {line.host for line in named[:listed]}
    rest = [line for line in lines if line.host not in listed_hosts]
    if rest:
        passing_rest = sum(line.state == Verdict.PASS for line in rest)
        parts = ([f"{len(rest) - passing_rest} more not passing"] if len(rest) > passing_rest else []) + (
            [f"{passing_rest} passing"] if passing_rest else [])
        blocks.append(context_block(f"… and {' and '.join(parts)}: `/verify {escape(entry.target)}` shows each "
                                    f"{'host' if len(rest) == 1 else 'of them'}").to_dict())
    return blocks


def watch_section(entries: Sequence[WatchEntry], hosts_of: Callable[[WatchEntry], Sequence[str]],
                  memory: dict[str, Remembered], limit: int = WATCH_HOME_BLOCKS) -> list[dict[str, Any]]:
    """The whole section in at most ``limit`` blocks: a header, then each entry (the room shared out)."""
    if not entries:
        return []
    head: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": "Watch"}}]
    shown = entries[:max(1, (limit - 2) // 2)]  # each entry 2 blocks at least; one line for those left out
    room = (limit - len(head) - (1 if len(shown) < len(entries) else 0)) // len(shown)
    blocks = head + [block for entry in shown
                     for block in entry_blocks(entry, hosts_of(entry), memory[entry.target], room)]
    if len(shown) < len(entries):
        left = len(entries) - len(shown)
        blocks.append(context_block(f"… and {left} more watch {'entry' if left == 1 else 'entries'} "
                                    "(`proofbot watch --once` runs them all)").to_dict())
    return blocks


async def watch_home_blocks(inventory: Inventory, audit: AuditStore, can_see: Callable[[str], Awaitable[bool]],
                            limit: int = WATCH_HOME_BLOCKS) -> list[dict[str, Any]]:
    """The entries posting to a channel this viewer is in (fails closed as the rest of the Home does)."""
    entries = [entry for entry in inventory.watch if await can_see(entry.channel)]
    if not entries:
        return []
    memory = await remembered(audit, [entry.target for entry in entries])
    return watch_section(entries, lambda entry: [host.name for host in inventory.targets([entry.target])], memory,
                         limit)

