"""Pure Block Kit rendering of operations for Slack: parent message, one reply per check, help.

Every message comes as (text fallback, blocks) and respects Slack's limits: at most 50
blocks, 3000 characters a section; long output is trimmed with a note saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slack_sdk.models.blocks import Block, ContextBlock, MarkdownTextObject, SectionBlock

from commands.audit_store import Event
from commands.findings import Finding
from commands.operation import OperationResult
from commands.registry import OPERATIONS

SECTION_LIMIT = 3000
STATUS_EMOJI = {"pass": ":white_check_mark:", "fail": ":x:", "warn": ":warning:", "error": ":grey_question:"}
VERDICT_EMOJI = {"pass": ":large_green_circle:", "fail": ":red_circle:", "error": ":large_yellow_circle:"}
VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "error": "COULD NOT CHECK"}
PRESENT_TENSE = {"verify": "Verifying", "restore": "Restoring", "restart": "Restarting"}
Message = tuple[str, list[dict[str, Any]]]


def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn reserves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code_block(text: str, limit: int = SECTION_LIMIT - 100) -> str:
    body = escape(text).replace("```", "`\u200b``").rstrip("\n") or " "
    if len(body) > limit:
        cut = len(body) - limit
        body = body[:limit] + f"\n… [{cut} more characters trimmed; full evidence in the audit log and --json]"
    return f"```{body}```"


def section_block(markdown: str) -> SectionBlock:
    if len(markdown) > SECTION_LIMIT:
        markdown = markdown[: SECTION_LIMIT - 20] + "\n… [trimmed]"
    return SectionBlock(text=MarkdownTextObject(text=markdown))


def context_block(markdown: str) -> ContextBlock:
    return ContextBlock(elements=[MarkdownTextObject(text=markdown[:SECTION_LIMIT])])


def as_dicts(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    return [block.to_dict() for block in blocks][:50]


def progress_message(operation: str, host: str, user_id: str, planned: Sequence[str],
                     findings: Sequence[Finding]) -> Message:
    done = {finding.name: finding for finding in findings}
    states = " · ".join(
        f"{STATUS_EMOJI[done[name].status]} `{name}`" if name in done else f":hourglass_flowing_sand: `{name}`"
        for name in planned
    )
    doing = PRESENT_TENSE.get(operation, operation)
    headline = (f":hourglass_flowing_sand: {doing} *{escape(host)}* for <@{user_id}>… "
                f"({len(done)}/{len(planned)} checks)")
    text = f"{doing} {host} for <@{user_id}>… ({len(done)}/{len(planned)} checks)"
    return text, as_dicts([section_block(headline), context_block(states or "connecting…")])


def verdict_message(result: OperationResult, user_id: str, backup: str | None) -> Message:
    counts = {s: sum(1 for f in result.checks if f.status == s) for s in STATUS_EMOJI}
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    headline = (f"{VERDICT_EMOJI[result.verdict]} *{escape(result.host)} {result.operation}: "
                f"{VERDICT_WORDS[result.verdict]}* — {tally} ({result.duration_s:.2f} s)")
    lines = [f"{STATUS_EMOJI[f.status]} `{f.name}` {escape(f.summary)}" for f in result.checks]
    note = f"operation `{result.operation_id}` · requested by <@{user_id}>"
    if backup:
        note += f" · backup `{escape(backup)}`"
    note += " · evidence in this thread"
    text = f"{result.host} {result.operation}: {VERDICT_WORDS[result.verdict]} ({tally})"
    body = section_block("\n".join(lines) or "no checks ran")
    return text, as_dicts([section_block(headline), body, context_block(note)])


def finding_message(finding: Finding) -> Message:
    headline = f"{STATUS_EMOJI[finding.status]} *{escape(finding.name)}* — {escape(finding.summary)}"
    blocks: list[Block] = [section_block(headline)]
    if finding.evidence is None:
        blocks.append(context_block("no evidence: the check could not run"))
    else:
        evidence = finding.evidence
        blocks.append(section_block(code_block(f"$ {evidence.command}\n{evidence.output}")))
        exit_note = "no exit status" if evidence.exit_status is None else f"exit {evidence.exit_status}"
        blocks.append(context_block(f"{exit_note} · {evidence.duration_s:.3f} s"))
    return f"{finding.name}: {finding.status} — {finding.summary}", as_dicts(blocks)


def help_message(hosts: Sequence[str]) -> str:
    commands = "\n".join(f"• `/{spec.name} {spec.usage}` — {spec.summary}" for spec in OPERATIONS)
    known = ", ".join(f"`{escape(host)}`" for host in hosts) or "none"
    return (f"*proofbot* proves that a change took effect; every verdict comes with its evidence.\n"
            f"{commands}\n• `/verify help` — this message\nKnown hosts: {known}")


def error_message(message: str, hint: str) -> str:
    """The message may echo what the user typed, so it is escaped; hints are built only from
    the inventory and proofbot's own words, and may carry Slack links such as <#C123>."""
    return f":no_entry: {escape(message)}" + (f"\n{hint}" if hint else "")


def as_plain_text(message: Message) -> str:
    """How a message reads in Slack, for terminals (the demo) and logs."""
    _, blocks = message
    lines: list[str] = []
    for block in blocks:
        if block["type"] == "section":
            lines.append(block["text"]["text"])
        elif block["type"] == "context":
            lines.extend("  " + element.get("text", "") for element in block["elements"])
        elif block["type"] == "actions":
            lines.append("  " + "  ".join(f"[ {element['text']['text']} ]" for element in block["elements"]))
    text = "\n".join(lines)
    for code, glyph in EMOJI_GLYPHS.items():
        text = text.replace(code, glyph)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("```", "")


EMOJI_GLYPHS = {
    ":white_check_mark:": "✓", ":x:": "✗", ":warning:": "!", ":grey_question:": "?",
    ":large_green_circle:": "●", ":red_circle:": "●", ":large_yellow_circle:": "●",
    ":hourglass_flowing_sand:": "…", ":no_entry:": "⛔",
}


def summary_message(operation_id: str, events: Sequence[Event]) -> Message:
    """The last reply of every operation thread: each recorded step, with its time, so the
    thread alone tells the story."""
    lines = []
    for event in events:
        details = event.details if isinstance(event.details, dict) else {}
        what = {"requested": f"requested by {event.actor}",
                "finished": f"finished: *{details.get('verdict', '?')}* {details.get('summary', '')}".rstrip()
                }.get(event.kind, event.kind)
        if event.kind in ("check", "step"):
            what = f"{STATUS_EMOJI.get(str(details.get('status')), '')} `{details.get('name')}` {details.get('status')}"
        elif event.kind in ("approved", "rejected", "expired"):
            what = f"{event.kind} by {event.actor}"
        lines.append(f"`{event.at[11:23]}` {escape(what) if event.kind == 'requested' else what}")
    body = "\n".join(lines)
    if len(body) > SECTION_LIMIT - 200:
        body = body[: SECTION_LIMIT - 260] + "\n… [trimmed: `proofbot audit` has every event]"
    head = f":receipt: Summary of operation `{operation_id}` ({len(events)} events, times UTC)"
    blocks = [section_block(head), section_block(body or "no events recorded")]
    return f"Summary of operation {operation_id}", as_dicts(blocks)
