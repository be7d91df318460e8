"""Block Kit's shared pieces for every Slack message: escaping, sections and context cut to Slack's limits,
code blocks, dates each reader sees in their time zone, mentions, a plan's approval footer, the ephemeral
error, and a message read back as plain text (the demo).

Every message comes as (text fallback, blocks) and respects Slack's limits: at most 50
blocks, 3000 characters a section; long output is trimmed with a note saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement, ContextBlock, MarkdownTextObject, SectionBlock

from bot.slack.emoji import EMOJI_GLYPHS
from bot.words import when
from commands.findings import NextStep
from commands.plans import Decidable
from commands.redact import redact

SECTION_LIMIT = 3000
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


def next_step_words(step: NextStep) -> str:
    """The next step as a Slack user does it: ``/restore ct129 pre-ddtree``, then the button to choose."""
    command = escape(" ".join([f"/{step.operation}", *step.args]))
    choice = f", then *{escape(step.slack_choice)}*" if step.slack_choice else ""
    return f"{escape(step.advice)} `{command}`{choice}"


def error_message(message: str, hint: str) -> str:
    """The message may echo what the user typed, so it is escaped; hints are built only from
    the inventory and proofbot's own words, and may carry Slack links such as <#C123>."""
    # Ephemeral replies leave through the ack or response_url, not the redacting client.
    return redact(f":no_entry: {escape(message)}" + (f"\n{hint}" if hint else ""))


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


def who(actor: str | None) -> str:
    """A Slack actor (``slack:U123``) as a mention; anyone else (``alice@laptop``) as code."""
    if not actor:
        return "someone unrecorded"
    if actor.startswith("slack:") and actor[6:].isalnum():
        return f"<@{actor[6:]}>"
    return f"`{escape(actor)}`"


def slack_date(at: str) -> str:
    """A timestamp Slack shows in each reader's own time zone, with the UTC text as fallback."""
    try:
        epoch = int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return escape(at)
    return f"<!date^{epoch}^{{date_short_pretty}} {{time_secs}}|{when(at)}>"


def approvers_words(approvers: Sequence[str], required: int = 1) -> str:
    """The approvers of a plan's policy: a user id as a mention, a user group by its handle (docs/policies.md)."""
    who = ", ".join(f"`{escape(a)}`" if a.startswith("@") else f"<@{a}>" for a in approvers)
    if not who:
        return "nobody (no approvers configured)"
    return f"{required} of {who}" if required > 1 else who


def approval_footer(plan: Decidable, expires_at: str, approvers: Sequence[str], *buttons: ButtonElement,
                    required: int = 1) -> list[Block]:
    """A plan's ids, expiry and approvers, then its buttons (Approve with its confirm dialog, Reject)."""
    return [context_block(f"plan `{plan.plan_hash[:12]}` · operation `{plan.operation_id}` · expires "
                          f"{slack_date(expires_at)}"
                          f" · approvers: {approvers_words(approvers, required)}"),
            ActionsBlock(elements=list(buttons))]
