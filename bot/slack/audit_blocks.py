"""What the audit log tells in Slack: ``/audit``'s parent and one reply per operation (linked to its own
thread), and the notice posted in an operation's thread when proofbot stopped while it ran."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import ActionsBlock, ButtonElement, MarkdownTextObject, SectionBlock

from bot.slack.blocks import Message, as_dicts, context_block, escape, section_block, slack_date, who
from bot.slack.emoji import VERDICT_EMOJI
from bot.slack.thread_blocks import FLEET_REVERIFY, VERIFY_NOW
from bot.words import approval_words, fleet_words, no_thread, operation_words, verdict_word, when
from commands.store.recovery import LEASE_ENDED, NOT_SENT, STOPPED, UNRECORDED_BEFORE_SEND, Interrupted
from commands.store.trail import OperationRecord
from commands.vocabulary import Operation


def audit_parent_message(host: str | None, records: Sequence[OperationRecord], user_id: str,
                         elsewhere: int = 0) -> Message:
    scope = f"for {host}" if host else "across hosts"
    if records:
        plural = "operation" if len(records) == 1 else "operations"
        text = f"Audit trail {scope}: last {len(records)} {plural}"
        note = f"newest first, one reply per operation in this thread · asked by <@{user_id}>"
    else:
        text = f"Audit trail {scope}: no operations " + ("shown here" if elsewhere else "recorded yet")
        note = f"asked by <@{user_id}>"
    if elsewhere:
        note += (f" · {elsewhere} more ran in other channels: not shown here, where their members may not be"
                 " (`proofbot audit` on the bot's machine lists every one)")
    headline = f":ledger: *{escape(text)}*"
    return text, as_dicts([section_block(headline), context_block(note)])


def audit_operation_message(record: OperationRecord, permalink: str | None, link_error: str | None = None) -> Message:
    """One operation: when, what, who asked, who approved, verdict, and a link to its own thread."""
    verdict = verdict_word(record.verdict)
    emoji = VERDICT_EMOJI.get(record.verdict, ":grey_question:")
    what = operation_words(record)  # a fleet's target and size; its counts or the fleet a part was in follow
    if permalink:
        where, where_text = f"<{permalink}|its thread>", permalink
    elif record.channel and record.thread_ts:
        where = where_text = f"(its thread in <#{record.channel}> could not be linked: {link_error or 'unknown'})"
    else:
        where = where_text = no_thread(record.via)
    approval = approval_words(record, actor=who(record.decided_by))
    headline = f"{emoji} *{escape(what)}*: *{verdict}*{escape(fleet_words(record))} · {where}"
    people = f"requested by {who(record.requested_by)} · {approval}"
    note = f"{slack_date(record.requested_at)} · operation `{escape(record.operation_id)}`"
    if record.finished_at:
        note += f" · finished {slack_date(record.finished_at)}"
    plain_approval = approval_words(record, actor=record.decided_by)
    text = (f"{when(record.requested_at)} {what}: {verdict}{fleet_words(record)} · "
            f"requested by {record.requested_by or '?'} · {plain_approval} · {where_text}")
    return text, as_dicts([section_block(f"{headline}\n{people}"), context_block(note)])


def interrupted_why(op: Interrupted) -> tuple[str, str]:
    """Who stopped: (the notice's first words, its body's cause), by the record's reason: this bot restarted,
    another replica stopped renewing its lease, or the database did not take this process's write."""
    if op.reason == STOPPED:
        return "proofbot restarted: ", "proofbot stopped"
    if op.reason == LEASE_ENDED:
        return f"{LEASE_ENDED}: ", LEASE_ENDED
    return "", UNRECORDED_BEFORE_SEND if op.not_sent else "the audit database did not take a write"


def _not_sent(op: Interrupted) -> str:
    """What the parent and the plan add for a restart never sent (nothing is unknown about it)."""
    return f"; {NOT_SENT}" if op.not_sent else ""


def interrupted_message(op: Interrupted) -> Message:
    first, why = interrupted_why(op)
    headline = f"{first}{op.operation} of {op.fleet_target or op.host} was interrupted" + ("" if first else f": {why}")
    if op.fleet_target is not None and op.operation == Operation.VERIFY:  # re-verified from the log, as if finished
        text = (f":warning: {why} while this verify of {op.fleet_target} was running; the hosts not "
                f"finished by then are marked interrupted. Operation `{op.operation_id}` is marked interrupted.")
        blocks = [SectionBlock(text=MarkdownTextObject(text=escape(text))),
                  ActionsBlock(elements=[ButtonElement(text="Re-verify the hosts that did not pass",
                                                       action_id=FLEET_REVERIFY, value=op.operation_id,
                                                       style="primary")])]
        return headline, [b.to_dict() for b in blocks]
    if op.fleet_target is not None:  # a rollout: where each host stood; nothing is restarted again without a plan
        text = (f":warning: {why} while this {op.operation} of {op.fleet_target} was running. "
                f"{rollout_states_words(op.hosts)}Operation `{op.operation_id}` is marked interrupted; no host is "
                f"restarted again without a new plan (`/restart {op.fleet_target}` shows every host as it is now).")
        return headline, [SectionBlock(text=MarkdownTextObject(text=escape(text))).to_dict()]
    after = (f"the restart was never sent (proofbot records it before sending it): {op.host}'s service runs as "
             "before, same PID expected" if op.not_sent
             else "nothing is known about what happened on the host after that")
    text = (f":warning: {why} while this {op.operation} of {op.host} was running. The last step "
            f"recorded was `{op.last_step}` at {op.last_at}; {after}. Operation `{op.operation_id}` is marked "
            "interrupted.")
    blocks = [SectionBlock(text=MarkdownTextObject(text=escape(text).replace("&lt;", "<"))),
              ActionsBlock(elements=[ButtonElement(text="Verify now", action_id=VERIFY_NOW, value=op.operation_id,
                                                   style="primary")])]
    return headline, [b.to_dict() for b in blocks]


def interrupted_parent_message(op: Interrupted) -> Message:
    """The operation's parent message, left on its last progress line, once it is finished interrupted: what
    was interrupted, why, and that its thread says what is known (the plan, if any, is ``interrupted`` too)."""
    _, why = interrupted_why(op)
    text = (f"{op.operation} of {op.fleet_target or op.host}: interrupted ({why}){_not_sent(op)}; "
            f"operation {op.operation_id}, requested by {op.requested_by or '?'}, what is known is in this thread")
    headline = (f":warning: *{escape(f'{op.operation} of {op.fleet_target or op.host}')}: interrupted* "
                f"({escape(why)}){escape(_not_sent(op))}; what is known is in this thread")
    note = f"operation `{escape(op.operation_id)}` · requested by {who(op.requested_by)}"  # who asked, as any parent
    return text, as_dicts([section_block(headline), context_block(note)])


def interrupted_plan_status(op: Interrupted, approvers: Sequence[str], decided_at: str | None) -> str:
    """The status line under an interrupted operation's plan, which its parent keeps showing (what was planned,
    who asked): who approved it, when, and that it was interrupted, why and where what is known is. Its buttons
    are gone: an interrupted plan can no longer be approved or rejected; "Verify now" is in the thread."""
    _, why = interrupted_why(op)
    by = ", ".join(who(a if ":" in a else f"slack:{a}") for a in approvers) or who(None)
    return (f":white_check_mark: approved by {by}" + (f" at {escape(decided_at)}" if decided_at else "")
            + f" — :warning: *interrupted* ({escape(why)}){escape(_not_sent(op))}; what is known is in this thread"
            f" · operation "
            f"`{escape(op.operation_id)}`")


ROLLOUT_STATE_WORDS = {"done": "restarted and proven", "failed": "restarted, its proof failed",
                       "unknown": "under way when it stopped, its state is unknown: verify it",
                       "untouched": "not reached, never restarted"}


def rollout_states_words(hosts: Sequence[tuple[str, str]], most: int = 20) -> str:
    """``gpu1: restarted and proven. gpu2: under way…`` by state, at most ``most`` names each (bounded)."""
    said = []
    for state, words in ROLLOUT_STATE_WORDS.items():
        names = [host for host, s in hosts if s == state]
        if names:
            shown = ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
            said.append(f"{shown}: {words}. ")
    return "".join(said)
