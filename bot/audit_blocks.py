"""Pure Block Kit rendering of the audit trail: the parent message and one reply per operation.

Built from ``bot.blocks``' primitives so the same escaping and Slack limits apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.audit_terminal import approval_words, no_thread, verdict_word, when
from bot.blocks import Message, as_dicts, context_block, escape, section_block
from commands.audit import IN_PROGRESS, OperationRecord

VERDICT_EMOJI = {"pass": ":large_green_circle:", "fail": ":red_circle:", "error": ":large_yellow_circle:",
                 "rejected": ":no_entry_sign:", "expired": ":hourglass:", "refused": ":no_entry:",
                 "interrupted": ":warning:", IN_PROGRESS: ":hourglass_flowing_sand:"}


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


def audit_parent_message(host: str | None, records: Sequence[OperationRecord], user_id: str) -> Message:
    scope = f"for {host}" if host else "across hosts"
    if records:
        plural = "operation" if len(records) == 1 else "operations"
        text = f"Audit trail {scope}: last {len(records)} {plural}"
        note = f"newest first, one reply per operation in this thread · asked by <@{user_id}>"
    else:
        text = f"Audit trail {scope}: no operations recorded yet"
        note = f"asked by <@{user_id}>"
    headline = f":ledger: *{escape(text)}*"
    return text, as_dicts([section_block(headline), context_block(note)])


def audit_operation_message(record: OperationRecord, permalink: str | None, link_error: str | None = None) -> Message:
    """One operation: when, what, who asked, who approved, verdict, and a link to its own thread."""
    verdict = verdict_word(record.verdict)
    emoji = VERDICT_EMOJI.get(record.verdict, ":grey_question:")
    what = f"{record.operation or '?'} {record.host or '?'}"
    if permalink:
        where, where_text = f"<{permalink}|its thread>", permalink
    elif record.channel and record.thread_ts:
        where = where_text = f"(its thread in <#{record.channel}> could not be linked: {link_error or 'unknown'})"
    else:
        where = where_text = no_thread(record.via)
    approval = approval_words(record, actor=who(record.decided_by))
    headline = f"{emoji} *{escape(what)}*: *{verdict}* · {where}"
    people = f"requested by {who(record.requested_by)} · {approval}"
    note = f"{slack_date(record.requested_at)} · operation `{escape(record.operation_id)}`"
    if record.finished_at:
        note += f" · finished {slack_date(record.finished_at)}"
    plain_approval = approval_words(record, actor=record.decided_by)
    text = (f"{when(record.requested_at)} {what}: {verdict} · requested by {record.requested_by or '?'} · "
            f"{plain_approval} · {where_text}")
    return text, as_dicts([section_block(f"{headline}\n{people}"), context_block(note)])
