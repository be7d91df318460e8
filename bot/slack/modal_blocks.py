"""Reject's modal (why, in at most ``REASON_LIMIT`` characters) and what a rejection says on the plan and
in its thread."""

from __future__ import annotations

from typing import Any

from bot.slack.blocks import Message, as_dicts, escape, section_block

REJECT_REASON_VIEW = "reject_reason"  # the modal's callback_id
REASON_BLOCK, REASON_INPUT = "reason", "reason_input"
REASON_LIMIT = 500  # characters; Slack's input enforces it, the listener cuts anything longer again


def reject_modal(operation: str, host: str, plan_id: str, metadata: str) -> dict[str, Any]:
    """Reject's modal: why, in at most REASON_LIMIT characters; ``metadata`` carries the plan and the
    message it was clicked on (never trusted: the decision re-reads the plan by id)."""
    return {
        "type": "modal", "callback_id": REJECT_REASON_VIEW, "private_metadata": metadata,
        "title": {"type": "plain_text", "text": f"Reject this {operation}"[:24]},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            section_block(f"Reject the {escape(operation)} plan for *{escape(host)}* (operation "
                          f"`{escape(plan_id)}`). Nothing will be changed; the reason goes to the audit log and "
                          "the plan's thread.").to_dict(),
            {"type": "input", "block_id": REASON_BLOCK,
             "label": {"type": "plain_text", "text": "Why?"},
             "element": {"type": "plain_text_input", "action_id": REASON_INPUT, "multiline": True,
                         "max_length": REASON_LIMIT,
                         "placeholder": {"type": "plain_text", "text": "e.g. wrong backup: use pre-ddtree-2"}}},
        ],
    }


def rejected_status(user: str, decided_at: str | None, reason: str, nothing_done: str) -> str:
    return f":no_entry_sign: rejected by <@{user}> at {decided_at}: {escape(reason)}; {nothing_done}"


def rejection_reply(user: str, reason: str) -> Message:
    # `text` is mrkdwn too (notifications, clients without blocks): typed `<!channel>` must not ping
    text = f"Rejected by <@{user}>: {escape(reason)}"
    return text, as_dicts([section_block(f":no_entry_sign: Rejected by <@{user}>: {escape(reason)}")])
