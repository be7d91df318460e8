"""An operation's thread in Block Kit: the parent's progress and then its verdict (failures first), one reply
per check with its evidence, and the summary read back from the audit log that ends the thread."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import Block

from bot.slack.blocks import (
    SECTION_LIMIT,
    Message,
    as_dicts,
    code_block,
    context_block,
    escape,
    next_step_words,
    section_block,
)
from bot.slack.emoji import OUTCOME_CIRCLE, PRESENT_TENSE, STATUS_EMOJI, VERDICT_EMOJI, WORST_FIRST
from bot.words import VERDICT_WORDS, plural
from commands.findings import Finding
from commands.operation import OperationResult
from commands.store.events import Event
from commands.vocabulary import CheckStatus, EventKind, Outcome

VERIFY_NOW = "verify_now"
FLEET_REVERIFY = "fleet_reverify"  # a fleet verify's hosts that did not pass, read from the audit log


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
    """The thread's parent once done: the verdict (a pass with warnings is not a plain green pass, e.g. a
    restore that left the service on old code), then the checks, what went wrong first."""
    counts = {s: sum(1 for f in result.checks if f.status == s) for s in STATUS_EMOJI}
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    outcome = Outcome.of(result.verdict, (f.status for f in result.checks))
    emoji = OUTCOME_CIRCLE[outcome] if outcome == Outcome.WARN else VERDICT_EMOJI[result.verdict]
    words = (f"{VERDICT_WORDS[result.verdict]}, {plural(counts[CheckStatus.WARN], 'warning')}"
             if outcome == Outcome.WARN else VERDICT_WORDS[result.verdict])
    headline = f"{emoji} *{escape(result.host)} {result.operation}: {words}* — {tally} ({result.duration_s:.2f} s)"
    lines = [f"{STATUS_EMOJI[f.status]} `{f.name}` {escape(f.summary)}"
             + (f" → {next_step_words(f.next_step)}" if f.next_step else "")
             for f in sorted(result.checks, key=lambda f: WORST_FIRST.get(f.status, len(WORST_FIRST)))]
    note = f"operation `{result.operation_id}` · requested by <@{user_id}>"
    if backup:
        note += f" · backup `{escape(backup)}`"
    note += " · evidence in this thread"
    text = f"{result.host} {result.operation}: {words} ({tally})"
    body = section_block("\n".join(lines) or "no checks ran")
    return text, as_dicts([section_block(headline), body, context_block(note)])


def finding_message(finding: Finding) -> Message:
    headline = f"{STATUS_EMOJI[finding.status]} *{escape(finding.name)}* — {escape(finding.summary)}"
    if finding.next_step:
        headline += f"\n→ next: {next_step_words(finding.next_step)}"
    blocks: list[Block] = [section_block(headline)]
    if finding.evidence is None:
        blocks.append(context_block("no evidence: the check could not run"))
    else:
        evidence = finding.evidence
        blocks.append(section_block(code_block(f"$ {evidence.command}\n{evidence.output}")))
        exit_note = "no exit status" if evidence.exit_status is None else f"exit {evidence.exit_status}"
        blocks.append(context_block(f"{exit_note} · {evidence.duration_s:.3f} s"))
    return f"{finding.name}: {finding.status} — {finding.summary}", as_dicts(blocks)


def summary_message(operation_id: str, events: Sequence[Event]) -> Message:
    """The last reply of every operation thread: each recorded step, with its time, so the
    thread alone tells the story."""
    lines = []
    for event in events:
        details = event.details if isinstance(event.details, dict) else {}
        what = {str(EventKind.REQUESTED): f"requested by {event.actor}",
                EventKind.FINISHED: f"finished: *{details.get('verdict', '?')}* {details.get('summary', '')}".rstrip()
                }.get(event.kind, event.kind)
        if event.kind in (EventKind.CHECK, EventKind.STEP):
            what = f"{STATUS_EMOJI.get(str(details.get('status')), '')} `{details.get('name')}` {details.get('status')}"
        elif event.kind in (EventKind.APPROVED, EventKind.REJECTED, EventKind.EXPIRED):
            what = f"{event.kind} by {event.actor}"
        lines.append(f"`{event.at[11:23]}` {escape(what) if event.kind == EventKind.REQUESTED else what}")
    body = "\n".join(lines)
    if len(body) > SECTION_LIMIT - 200:
        body = body[: SECTION_LIMIT - 260] + "\n… [trimmed: `proofbot audit` has every event]"
    head = f":receipt: Summary of operation `{operation_id}` ({len(events)} events, times UTC)"
    blocks = [section_block(head), section_block(body or "no events recorded")]
    return f"Summary of operation {operation_id}", as_dicts(blocks)
