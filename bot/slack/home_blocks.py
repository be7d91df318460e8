"""What a Slack user sees without running an operation, in Block Kit: the App Home (every host's last
verdict by group, summarised past Slack's 100 blocks), the help, and the welcome when invited to a channel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.slack.blocks import (
    SECTION_LIMIT,
    Message,
    as_dicts,
    context_block,
    escape,
    section_block,
    slack_date,
    who,
)
from bot.slack.emoji import VERDICT_EMOJI
from bot.words import no_thread, verdict_word
from commands.registry import OPERATIONS
from commands.store.trail import OperationRecord
from commands.vocabulary import Verdict

HOME_BLOCK_LIMIT = 100  # Slack's limit for a Home tab
NOT_YOURS = "in a channel you are not in"  # a host whose last operation the viewer may not see


def help_message(hosts: Sequence[str]) -> str:
    commands = "\n".join(f"• `/{spec.name} {spec.usage}` — {spec.summary}" for spec in OPERATIONS)
    known = ", ".join(f"`{escape(host)}`" for host in hosts) or "none"
    return (f"*proofbot* proves that a change took effect; every verdict comes with its evidence.\n"
            f"{commands}\n• `/verify help` — this message\nKnown hosts: {known}")


def join_help_message(approvers: Sequence[str], channels: Sequence[str] | None, channel: str) -> Message:
    """Posted once when proofbot is invited to a channel: what it does here and who may approve."""
    commands = "\n".join(f"• `/{spec.name} {escape(spec.usage)}` — {escape(spec.summary)}" for spec in OPERATIONS)
    who = ", ".join(f"<@{approver}>" for approver in approvers) or "nobody yet (no approvers in the inventory)"
    if channels is None:
        here = "Commands work in this channel (the inventory allows any channel)."
    elif channel in channels:
        here = "Commands work in this channel."
    else:
        allowed = ", ".join(f"<#{c}>" for c in channels) or "none"
        here = f":no_entry: proofbot does not take commands in this channel; use {allowed}."
    body = (f"*proofbot* proves that a change took effect; every verdict comes with its evidence.\n{commands}\n"
            f"Restores and restarts wait for an approver: {who}.\n{here} `/verify help` lists the hosts.")
    return "proofbot is here: /verify, /restore, /restart, /audit", as_dicts([section_block(body)])


def _home_line(host: str, record: OperationRecord | None, workspace_url: str | None,
               hidden: frozenset[str] = frozenset()) -> str:
    if host in hidden:
        return f":lock: *{escape(host)}* — last operation {NOT_YOURS}"
    if record is None:
        return f":white_circle: *{escape(host)}* — never checked"
    emoji = VERDICT_EMOJI.get(record.verdict, ":grey_question:")
    if workspace_url and record.channel and record.thread_ts:
        where = f"<{workspace_url}archives/{record.channel}/p{record.thread_ts.replace('.', '')}|thread>"
    else:
        where = no_thread(record.via)
    part = f", part of {escape(record.part_of.target)}" if record.part_of else ""  # of a fleet: `verify gpu`
    return (f"{emoji} *{escape(host)}* — *{verdict_word(record.verdict)}* ({escape(record.operation or '?')}{part}) · "
            f"{slack_date(record.finished_at or record.requested_at)} · by {who(record.requested_by)} · {where}")


def _home_groups(groups: dict[str, tuple[str, ...]], hosts: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """Each written group with its hosts (a host in several groups is listed in each), then the hosts
    in no group; with no groups written, one list of every host."""
    written = [(name, members) for name, members in groups.items() if name != "all"]
    grouped = {host for _, members in written for host in members}
    rest = tuple(host for host in hosts if host not in grouped)
    if not written:
        return [("all hosts", tuple(hosts))]
    return [*written, *([("in no group", rest)] if rest else [])]


def _hosts(count: int) -> str:
    return f"{count} host{'s' if count != 1 else ''}"


def home_view(hosts: Sequence[str], groups: dict[str, tuple[str, ...]], last: dict[str, OperationRecord],
              workspace_url: str | None, updated_at: str, hidden: frozenset[str] = frozenset(),
              scope: str = "", limit: int = HOME_BLOCK_LIMIT) -> dict[str, Any]:
    """The App Home: every host's last verdict by group, when, who asked, its thread; ``hidden``: hosts whose
    last operation the viewer may not see, said as such. Past Slack's 100 blocks, each group is a count
    per verdict and only the hosts that did not pass are listed (``limit``: the blocks this part may take)."""
    sections = _home_groups(groups, hosts)
    head: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Last verdict per host"}},
        context_block(f"{len(hosts)} hosts · updated {slack_date(updated_at)} · refreshed as operations start and end "
                      "· `/audit HOST` for more").to_dict(), *([context_block(scope).to_dict()] if scope else [])]
    full: list[dict[str, Any]] = []
    for name, members in sections:
        full.append(section_block(f"*{escape(name)}* ({_hosts(len(members))})").to_dict())
        full.extend(section_block(_home_line(host, last.get(host), workspace_url, hidden)).to_dict()
                    for host in members)
    if len(head) + len(full) <= limit:
        return {"type": "home", "blocks": head + full}
    summary: list[dict[str, Any]] = []
    for name, members in sections:
        counts: dict[str, int] = {}
        for host in members:
            verdict = NOT_YOURS if host in hidden else last[host].verdict if host in last else "never checked"
            counts[verdict] = counts.get(verdict, 0) + 1
        tally = ", ".join(f"{n} {verdict_word(v) if v not in ('never checked', NOT_YOURS) else v}"
                          for v, n in counts.items())
        summary.append(section_block(f"*{escape(name)}* ({_hosts(len(members))}): {tally}").to_dict())
        lines = [_home_line(host, last.get(host), workspace_url, hidden) for host in members
                 if host not in last or last[host].verdict != Verdict.PASS]
        chunk: list[str] = []
        for line in lines:
            if chunk and len("\n".join([*chunk, line])) > SECTION_LIMIT - 100:
                summary.append(section_block("\n".join(chunk)).to_dict())
                chunk = []
            chunk.append(line)
        if chunk:
            summary.append(section_block("\n".join(chunk)).to_dict())
    room = limit - len(head) - 1
    if len(summary) > room:
        summary = [*summary[:room], context_block(f"… {len(summary) - room} more blocks not shown: "
                                                  "`proofbot audit` lists every operation").to_dict()]
    head[1] = context_block(f"{len(hosts)} hosts: too many to list, so only those that did not pass are · updated "
                            f"{slack_date(updated_at)} · `/audit HOST` for more").to_dict()
    return {"type": "home", "blocks": head + summary}


def home_outside_view(channels: Sequence[str], updated_at: str, unreadable: dict[str, str]) -> dict[str, Any]:
    """The Home of a viewer in none of the channels proofbot works in (or whose membership could not be
    read: ``unreadable``, channel -> Slack's error): nothing of any host, and why."""
    allowed = ", ".join(f"<#{c}>" for c in channels) or "none"
    why = (f"Who is in {', '.join(f'<#{c}> ({escape(e)})' for c, e in unreadable.items())} could not be read, so "
           "nothing is shown." if unreadable else f"You are in none of the channels proofbot works in ({allowed}).")
    return {"type": "home", "blocks": [
        {"type": "header", "text": {"type": "plain_text", "text": "Last verdict per host"}},
        section_block(f"{why} The Home shows each host's last operation only to members of the channel it ran "
                      "in.").to_dict(),
        context_block(f"updated {slack_date(updated_at)}").to_dict()]}
