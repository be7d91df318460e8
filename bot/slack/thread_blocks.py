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
from bot.words import VERDICT_WORDS, plural, shorten_middle
from commands.findings import Evidence, Finding
from commands.operation import OperationResult
from commands.store.events import Event
from commands.vocabulary import CheckStatus, EventKind, Outcome

VERIFY_NOW = "verify_now"
FLEET_REVERIFY = "fleet_reverify"  # a fleet verify's hosts that did not pass, read from the audit log
# A check's reply shows this much of its evidence; the rest is in one details file at the end of the thread.
INLINE_COMMAND_LINES, INLINE_OUTPUT_LINES, INLINE_LINE_CHARS = 2, 10, 200  # 14 lines: under 2,900
DETAILS_CHARS = 1_000_000
DETAILS_NOTE = "cut here: the whole command and output are in the details file at the end of this thread"


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


def finding_message(finding: Finding, cut_note: str = DETAILS_NOTE) -> Message:
    """One check's reply: its status and summary, and its evidence kept short (a long script or a raw
    ``/proc`` line is cut here; whole in the thread's details file, ``details_file``, or where
    ``cut_note`` says)."""
    headline = f"{STATUS_EMOJI[finding.status]} *{escape(finding.name)}* — {escape(finding.summary)}"
    if finding.next_step:
        headline += f"\n→ next: {next_step_words(finding.next_step)}"
    blocks: list[Block] = [section_block(headline)]
    if finding.evidence is None:
        blocks.append(context_block("no evidence: the check could not run"))
    else:
        evidence = finding.evidence
        shown, cut = inline_evidence(evidence.command, evidence.output)
        blocks.append(section_block(code_block(shown)))
        exit_note = "no exit status" if evidence.exit_status is None else f"exit {evidence.exit_status}"
        blocks.append(context_block(f"{exit_note} · {evidence.duration_s:.3f} s"
                                    + (f" · {cut_note}" if cut else "")))
    return f"{finding.name}: {finding.status} — {finding.summary}", as_dicts(blocks)


def inline_evidence(command: str, output: str) -> tuple[str, bool]:
    """``$ command`` and its output as a check's reply shows them, and whether anything was cut: at most
    ``INLINE_COMMAND_LINES`` of a script, ``INLINE_OUTPUT_LINES`` of output, each line at most
    ``INLINE_LINE_CHARS`` (a raw ``/proc/PID/stat`` line, a long command line: its middle cut)."""
    script, said = command.splitlines() or [""], output.rstrip("\n").splitlines()
    lines = [f"$ {line}" for line in script[:INLINE_COMMAND_LINES]]
    if len(script) > INLINE_COMMAND_LINES:
        lines.append(f"$ … {plural(len(script) - INLINE_COMMAND_LINES, 'more line')} of script")
    lines += said[:INLINE_OUTPUT_LINES]
    if len(said) > INLINE_OUTPUT_LINES:
        lines.append(f"… {plural(len(said) - INLINE_OUTPUT_LINES, 'more line')}")
    shown = [shorten_middle(line, INLINE_LINE_CHARS) for line in lines]
    cut = len(script) > INLINE_COMMAND_LINES or len(said) > INLINE_OUTPUT_LINES or shown != lines
    return "\n".join(shown), cut


def details_file(findings: Sequence[Finding]) -> str | None:
    """The thread's details file: the whole command and output of every check its reply showed cut, or
    None when nothing was cut (then there is no file)."""
    parts = []
    for finding in findings:
        evidence = finding.evidence
        if evidence is None or not inline_evidence(evidence.command, evidence.output)[1]:
            continue
        status = "no exit status" if evidence.exit_status is None else f"exit {evidence.exit_status}"
        # not "pass: …": the redaction on the way out would read that as a password
        parts.append(f"--- {finding.name} · {finding.status} · {' '.join(finding.summary.split())}\n"
                     f"$ {evidence.command}\n{evidence.output.rstrip()}\n({status}, {evidence.duration_s:.3f} s)")
    if not parts:
        return None
    text = "\n\n".join(parts) + "\n"
    if len(text) > DETAILS_CHARS:
        text = text[:DETAILS_CHARS] + "\n… [cut to keep this file small: the audit log's check events have it all]\n"
    return text


def findings_of(events: Sequence[Event]) -> list[Finding]:
    """The findings an operation's check and step events recorded (a restart's own steps carry none)."""
    found = []
    for event in events:
        details = event.details if isinstance(event.details, dict) else {}
        if event.kind not in (EventKind.CHECK, EventKind.STEP) or not isinstance(details.get("evidence"), dict):
            continue
        evidence = details["evidence"]
        found.append(Finding(str(details.get("name")), details.get("status", CheckStatus.ERROR),
                             str(details.get("summary", "")),
                             Evidence(str(evidence.get("command", "")), evidence.get("exit_status"),
                                      str(evidence.get("output", "")), float(evidence.get("duration_s") or 0))))
    return found


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
