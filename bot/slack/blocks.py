"""Pure Block Kit rendering of operations for Slack: parent message, one reply per check, help.

Every message comes as (text fallback, blocks) and respects Slack's limits: at most 50
blocks, 3000 characters a section; long output is trimmed with a note saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.plain_text import (
    ROLLOUT_MARKS,
    ROLLOUT_WORDS,
    VERDICT_WORDS,
    approval_words,
    fleet_words,
    no_thread,
    operation_words,
    progress_line,
    render_restart_plan,
    rollout_proof_words,
    shorten,
    shorten_middle,
    verdict_word,
    when,
)
from bot.plain_text import (
    runs_old_code as runs_old_code,  # re-exported: the Slack handlers and the demo import it from here
)
from commands.findings import Finding, NextStep
from commands.fleet.names import compress_names
from commands.operation import OperationResult
from commands.plans import Decidable
from commands.redact import redact
from commands.registry import OPERATIONS
from commands.restart.plan import RestartPlan
from commands.restart.rollout import HostOutcome, RolloutPlan, RolloutResult
from commands.restart.watch import RestartProgress
from commands.restore.plan import FileState, RestorePlan
from commands.store.events import Event
from commands.store.recovery import Interrupted
from commands.store.trail import IN_PROGRESS, OperationRecord

SECTION_LIMIT = 3000
STATUS_EMOJI = {"pass": ":white_check_mark:", "fail": ":x:", "warn": ":warning:", "error": ":grey_question:",
                "skipped": ":fast_forward:"}
VERDICT_EMOJI = {"pass": ":large_green_circle:", "fail": ":red_circle:", "error": ":large_yellow_circle:",
                 "rejected": ":no_entry_sign:", "expired": ":hourglass:", "refused": ":no_entry:",
                 "interrupted": ":warning:", IN_PROGRESS: ":hourglass_flowing_sand:"}
PASS_WITH_WARNINGS = ":large_orange_circle:"
WORST_FIRST = {"fail": 0, "error": 1, "warn": 2, "pass": 3, "skipped": 4}  # a stable sort keeps the plan's order
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
    """The thread's parent once done: the verdict (a pass with warnings is not a plain green pass, e.g. a
    restore that left the service on old code), then the checks, what went wrong first."""
    counts = {s: sum(1 for f in result.checks if f.status == s) for s in STATUS_EMOJI}
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    warned = result.verdict == "pass" and counts["warn"] > 0
    emoji = PASS_WITH_WARNINGS if warned else VERDICT_EMOJI[result.verdict]
    words = f"{VERDICT_WORDS[result.verdict]}, {counts['warn']} warning{'s' if counts['warn'] > 1 else ''}" \
        if warned else VERDICT_WORDS[result.verdict]
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


def next_step_words(step: NextStep) -> str:
    """The next step as a Slack user does it: ``/restore ct129 pre-ddtree``, then the button to choose."""
    command = escape(" ".join([f"/{step.operation}", *step.args]))
    choice = f", then *{escape(step.slack_choice)}*" if step.slack_choice else ""
    return f"{escape(step.advice)} `{command}`{choice}"


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


def help_message(hosts: Sequence[str]) -> str:
    commands = "\n".join(f"• `/{spec.name} {spec.usage}` — {spec.summary}" for spec in OPERATIONS)
    known = ", ".join(f"`{escape(host)}`" for host in hosts) or "none"
    return (f"*proofbot* proves that a change took effect; every verdict comes with its evidence.\n"
            f"{commands}\n• `/verify help` — this message\nKnown hosts: {known}")


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


EMOJI_GLYPHS = {
    ":white_check_mark:": "✓", ":x:": "✗", ":warning:": "!", ":grey_question:": "?", ":fast_forward:": "»",
    ":large_green_circle:": "●", ":red_circle:": "●", ":large_yellow_circle:": "●", ":large_orange_circle:": "●",
    ":hourglass_flowing_sand:": "…", ":no_entry:": "⛔", ":no_entry_sign:": "⊘", ":hourglass:": "⌛",
    ":receipt:": "≡", ":white_circle:": "○", ":heavy_plus_sign:": "+", ":heavy_equals_sign:": "=", ":pencil2:": "✏",
    ":leftwards_arrow_with_hook:": "↩", ":arrows_counterclockwise:": "↻", ":ledger:": "▤", ":lock:": "🔒",
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





RESTORE_APPROVE = "restore_approve"
RESTORE_APPROVE_WITH_EXTRAS = "restore_approve_move_extras"
RESTORE_REJECT = "restore_reject"


def _file_line(f: FileState) -> str:
    if f.state == "missing":
        return f":heavy_plus_sign: `{escape(f.name)}` missing at `{escape(f.live_path)}`: written from the source"
    if f.state == "same":
        return f":heavy_equals_sign: `{escape(f.name)}` identical (`{(f.live_sha or '')[:12]}`)"
    if f.state == "unreadable":
        return f":grey_question: `{escape(f.name)}` cannot be planned: {escape(f.problem)}"
    return (f":pencil2: `{escape(f.name)}` live `{(f.live_sha or '')[:12]}` ({f.live_size} B, {f.live_mode} "
            f"{escape(f.live_owner or '?')}) → `{(f.source_sha or '')[:12]}` ({f.source_size} B)"
            + (f", symlink → `{escape(f.live_target)}` (the target is written, the link kept)"
               if f.live_target else ""))


def plan_summary_blocks(plan: RestorePlan, requester: str) -> list[Block]:
    changed = len(plan.changes)
    head = (f":leftwards_arrow_with_hook: *Restore plan for {escape(plan.host.name)}* from "
            f"{escape(plan.source.label)}, requested by <@{requester}>: {changed} file(s) to replace")
    blocks: list[Block] = [section_block(head), section_block("\n".join(_file_line(f) for f in plan.files))]
    if plan.extras:
        blocks.append(section_block(f":warning: {len(plan.extras)} extra file(s) in the watch dirs, not in the backup: "
                               + ", ".join(f"`{escape(p)}`" for p in plan.extras)))
    return blocks


def restore_plan_message(plan: RestorePlan, requester: str, expires_at: str, approvers: Sequence[str]) -> Message:
    blocks = plan_summary_blocks(plan, requester)
    who = ", ".join(f"<@{a}>" for a in approvers) or "nobody (no approvers configured)"
    blocks.append(ContextBlock(elements=[MarkdownTextObject(
        text=f"plan `{plan.plan_hash[:12]}` · operation `{plan.operation_id}` · expires {slack_date(expires_at)} · "
             f"approvers: {who} · diffs in the thread")]))
    confirm = ConfirmObject(title="Apply this restore?",
                            text=f"Replace {len(plan.changes)} file(s) on {plan.host.name}. The current files are "
                                 "copied to a snapshot first.",
                            confirm="Restore", deny="Cancel")
    buttons = [ButtonElement(text="Approve", action_id=RESTORE_APPROVE, value=plan.operation_id, style="primary",
                             confirm=confirm)]
    if plan.extras:
        extras_confirm = ConfirmObject(title="Restore and move extras?",
                                       text=f"Also move {len(plan.extras)} extra file(s) into the snapshot dir.",
                                       confirm="Restore + move", deny="Cancel")
        buttons.append(ButtonElement(text="Approve + move extras", action_id=RESTORE_APPROVE_WITH_EXTRAS,
                                     value=plan.operation_id, confirm=extras_confirm))
    buttons.append(ButtonElement(text="Reject", action_id=RESTORE_REJECT, value=plan.operation_id, style="danger"))
    blocks.append(ActionsBlock(elements=buttons))
    text = f"Restore plan for {plan.host.name}: {len(plan.changes)} file(s) to replace; approval needed"
    return text, as_dicts(blocks)


def restore_decided_message(plan: RestorePlan, requester: str, status: str) -> Message:
    """The plan without its buttons, with what became of it."""
    blocks = [*plan_summary_blocks(plan, requester),
              ContextBlock(elements=[MarkdownTextObject(text=status[:SECTION_LIMIT])])]
    return f"Restore plan for {plan.host.name}: {status}", as_dicts(blocks)


def diff_message(f: FileState) -> Message:
    body = f.diff or "(no textual diff: binary or unreadable)"
    if len(body) > 2800:
        body = body[:2700] + f"\n… [{len(body) - 2700} more characters: the whole diff is attached below]"
    blocks = [section_block(f":pencil2: diff of `{escape(f.name)}` (live → source)"),
              section_block(code_block(body, 2800))]
    return f"diff of {f.name}", as_dicts(blocks)


def restore_planning_message(host: str, source: str, requester: str) -> Message:
    text = f"Planning a restore of {host} from {source} for <@{requester}>…"
    return text, [section_block(f":hourglass_flowing_sand: Planning a restore of *{escape(host)}* from "
                           f"{escape(source)} for <@{requester}>…").to_dict()]


def nothing_to_do_message(plan: RestorePlan, requester: str) -> Message:
    status = (":grey_question: cannot restore: the source is unreadable" if plan.unreadable
              else ":white_check_mark: nothing differs from the source: nothing to approve")
    return restore_decided_message(plan, requester, status)



RESTART_APPROVE = "restart_approve"
RESTART_REJECT = "restart_reject"
RESTART_NOW = "restart_now"
VERIFY_NOW = "verify_now"
FLEET_REVERIFY = "fleet_reverify"  # a fleet verify's hosts that did not pass, read from the audit log


def _head(plan: RestartPlan, requester: str) -> list[Block]:
    service = plan.service
    head = (f":arrows_counterclockwise: *Restart plan for {escape(plan.host.name)}* ({escape(service.unit)}, "
            f"{service.manager}), requested by <@{requester}>")
    return [section_block(head), section_block(code_block(render_restart_plan(plan, title=False)))]


def approval_footer(plan: Decidable, expires_at: str, approvers: Sequence[str], *buttons: ButtonElement) -> list[Block]:
    """A plan's ids, expiry and approvers, then its buttons (Approve with its confirm dialog, Reject)."""
    who = ", ".join(f"<@{a}>" for a in approvers) or "nobody (no approvers configured)"
    return [context_block(f"plan `{plan.plan_hash[:12]}` · operation `{plan.operation_id}` · expires "
                          f"{slack_date(expires_at)}"
                          f" · approvers: {who}"), ActionsBlock(elements=list(buttons))]


def restart_plan_message(plan: RestartPlan, requester: str, expires_at: str, approvers: Sequence[str]) -> Message:
    confirm = ConfirmObject(title="Restart now?", confirm="Restart", deny="Cancel",
                            text=f"Restart {plan.service.unit} on {plan.host.name}, then prove it came back right.")
    blocks = [*_head(plan, requester),
              *approval_footer(plan, expires_at, approvers,
                               ButtonElement(text="Approve", action_id=RESTART_APPROVE, value=plan.operation_id,
                                             style="primary", confirm=confirm),
                               ButtonElement(text="Reject", action_id=RESTART_REJECT, value=plan.operation_id,
                                             style="danger"))]
    text = f"Restart plan for {plan.host.name}: approval needed"
    return text, as_dicts(blocks)


def restart_status_message(plan: RestartPlan, requester: str, status: str,
                           progress: RestartProgress | None = None) -> Message:
    blocks = _head(plan, requester)
    if progress is not None:
        blocks.append(section_block(f":hourglass_flowing_sand: `{escape(progress_line(progress))}`"))
    blocks.append(context_block(status))
    line = f" — {progress_line(progress)}" if progress is not None else ""
    return f"Restart of {plan.host.name}: {status}{line}", as_dicts(blocks)


def restart_now_message(host: str, operation_id: str) -> Message:
    """Offered after a restore when the running process predates the restored files."""
    text = (f":warning: the service on {escape(host)} is still running the old code: restart it. "
            "*Restart now* plans a restart (it still needs an approver).")
    blocks = [section_block(text),
              ActionsBlock(elements=[ButtonElement(text="Restart now", action_id=RESTART_NOW, value=operation_id)])]
    return f"{host} is still running the old code: restart it", as_dicts(blocks)





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


def interrupted_message(op: Interrupted) -> Message:
    if op.fleet_target is not None and op.operation == "verify":  # re-verified from the audit log, like a finished one
        text = (f":warning: proofbot stopped while this verify of {op.fleet_target} was running; the hosts not "
                f"finished by then are marked interrupted. Operation `{op.operation_id}` is marked interrupted.")
        blocks = [SectionBlock(text=MarkdownTextObject(text=escape(text))),
                  ActionsBlock(elements=[ButtonElement(text="Re-verify the hosts that did not pass",
                                                       action_id=FLEET_REVERIFY, value=op.operation_id,
                                                       style="primary")])]
        return f"proofbot restarted: verify of {op.fleet_target} was interrupted", [b.to_dict() for b in blocks]
    if op.fleet_target is not None:  # a rollout: the group is typed again, and its plan shows every host's state
        text = (f":warning: proofbot stopped while this {op.operation} of {op.fleet_target} was running; the hosts "
                f"not finished by then are marked interrupted. Operation `{op.operation_id}` is marked interrupted: "
                f"run `/{op.operation} {op.fleet_target}` again for a verdict.")
        return (f"proofbot restarted: {op.operation} of {op.fleet_target} was interrupted",
                [SectionBlock(text=MarkdownTextObject(text=escape(text))).to_dict()])
    text = (f":warning: proofbot stopped while this {op.operation} of {op.host} was running. The last step "
            f"recorded was `{op.last_step}` at {op.last_at}; nothing is known about what happened on the host "
            f"after that. Operation `{op.operation_id}` is marked interrupted.")
    blocks = [SectionBlock(text=MarkdownTextObject(text=escape(text).replace("&lt;", "<"))),
              ActionsBlock(elements=[ButtonElement(text="Verify now", action_id=VERIFY_NOW, value=op.operation_id,
                                                   style="primary")])]
    return f"proofbot restarted: {op.operation} of {op.host} was interrupted", [b.to_dict() for b in blocks]


# -- rolling restart (README "Rolling restart") ------------------------------------------------

ROLLOUT_APPROVE = "rollout_approve"
ROLLOUT_REJECT = "rollout_reject"
ROLLOUT_LIST_SECTIONS = 4  # the host list's share of a message: ~11,600 characters, the rest in the file
ROLLOUT_FILE_OVER = 20  # more hosts than this: the whole plan is attached to the thread as a file
ROLLOUT_EMOJI = {**VERDICT_EMOJI, "refused": ":no_entry_sign:"}


def _rollout_groups(plan: RolloutPlan) -> list[tuple[str, list[RestartPlan]]]:
    """Hosts that run the same command line (same unit and manager) under one heading, in plan order."""
    groups: dict[str, list[RestartPlan]] = {}
    for host_plan in plan.hosts:
        service = host_plan.service
        cmdline = shorten_middle(host_plan.before.cmdline or "(cmdline unreadable)", 300)
        key = f"`{escape(service.unit)}` ({service.manager}) · `{escape(cmdline)}`"
        groups.setdefault(key, []).append(host_plan)
    return list(groups.items())


def rollout_host_list(plan: RolloutPlan, sections: int = ROLLOUT_LIST_SECTIONS) -> list[str]:
    """Every host's PID under its command line, packed into at most ``sections`` sections of Slack's
    3,000 characters; what does not fit is counted ("… 380 more hosts"), never cut mid-word."""
    budget = SECTION_LIMIT - 100
    pieces: list[tuple[str, bool]] = []  # (text, is a host)
    for heading, members in _rollout_groups(plan):
        pieces.append((f"*{len(members)} host{'s' if len(members) != 1 else ''}* · {heading}\n", False))
        pieces += [(f"`{escape(p.host.name)}` {p.before.main_pid or 'no PID'}"
                    + (" · " if i < len(members) - 1 else "\n"), True) for i, p in enumerate(members)]
    packed, shown = [""], 0
    for piece, is_host in pieces:
        room = budget - (120 if len(packed) == sections else 0)  # the last section keeps room for the note
        if len(packed[-1]) + len(piece) > room:
            if len(packed) == sections:
                break
            packed.append("")
        packed[-1] += piece
        shown += is_host
    if shown < len(plan.hosts):
        packed[-1] = packed[-1].removesuffix(" · ") + "\n"
        packed[-1] += f"… {len(plan.hosts) - shown} more hosts: every host's PID and cmdline are in the attached plan"
    return [text.rstrip() for text in packed if text.strip()]


def _rollout_head(plan: RolloutPlan, requester: str, *, with_hosts: bool = True) -> list[Block]:
    count = len(plan.hosts)
    head = (f":arrows_counterclockwise: *Rolling restart plan for {escape(plan.target)}*: {count} "
            f"host{'s' if count != 1 else ''}, {plan.restart_batch} at a time, requested by <@{requester}>\n"
            f"Each host is restarted and must prove {rollout_proof_words(plan)} before the next batch starts; "
            "the first host not proven halts the rollout (the rest of its batch finishes, later hosts are not "
            "touched).")
    blocks: list[Block] = [section_block(head)]
    if with_hosts:
        blocks += [section_block(text) for text in rollout_host_list(plan)]
    return blocks


def rollout_plan_message(plan: RolloutPlan, requester: str, expires_at: str, approvers: Sequence[str]) -> Message:
    count = len(plan.hosts)
    confirm = ConfirmObject(title="Start the rolling restart?", confirm="Restart all", deny="Cancel",
                            text=f"Restart {count} hosts of {plan.target}, {plan.restart_batch} at a time, each "
                                 "proven before the next; it halts at the first host not proven.")
    blocks = [*_rollout_head(plan, requester),
              *approval_footer(plan, expires_at, approvers,
                               ButtonElement(text="Approve", action_id=ROLLOUT_APPROVE, value=plan.operation_id,
                                             style="primary", confirm=confirm),
                               ButtonElement(text="Reject", action_id=ROLLOUT_REJECT, value=plan.operation_id,
                                             style="danger"))]
    return f"Rolling restart plan for {plan.target} ({count} hosts): approval needed", as_dicts(blocks)


def rollout_status_message(plan: RolloutPlan, requester: str, status: str, progress: str = "") -> Message:
    """The plan without its buttons, with what became of it (and, while it runs, the progress line)."""
    blocks = _rollout_head(plan, requester)
    if progress:
        blocks.append(section_block(f":hourglass_flowing_sand: {escape(progress)}"))
    blocks.append(context_block(status))
    return f"Rolling restart of {plan.target}: {progress or status}", as_dicts(blocks)


def _names(names: list[str], limit: int = 600) -> str:
    return escape(shorten(compress_names(names) or "-", limit))


def rollout_result_message(plan: RolloutPlan, requester: str, status: str, result: RolloutResult) -> Message:
    counts = result.counts()
    headline = (f"{ROLLOUT_EMOJI[result.verdict]} *restart {escape(result.target)}: "
                f"{ROLLOUT_WORDS[result.verdict]}* — {counts['done']} proven, {counts['failed']} failed, "
                f"{counts['untouched']} untouched ({result.duration_s:.1f} s)")
    lines = [headline]
    if result.halted:
        lines.append(escape(result.halted))
    lines += [f"{ROLLOUT_MARKS[state]} {state} ({counts[state]}): {_names(result.named(state))}"
              for state in ("done", "failed", "untouched")]
    blocks = [*_rollout_head(plan, requester, with_hosts=False), section_block("\n".join(lines)),
              context_block(f"{status} · operation `{result.operation_id}` · one reply per host in this thread")]
    text = (f"restart {result.target}: {ROLLOUT_WORDS[result.verdict]} — done {len(result.named('done'))}, "
            f"failed {len(result.named('failed'))}, untouched {len(result.named('untouched'))}")
    return text, as_dicts(blocks)


def rollout_host_message(outcome: HostOutcome, requester: str) -> Message:
    """One reply per host: its restart's proof, or why it was not restarted."""
    if outcome.result is not None:
        return verdict_message(outcome.result, requester, None)
    text = f":no_entry_sign: *{escape(outcome.host)}* not restarted: {escape(outcome.reason)}"
    return f"{outcome.host} not restarted: {outcome.reason}", as_dicts([section_block(text)])


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


HOME_BLOCK_LIMIT = 100  # Slack's limit for a Home tab


NOT_YOURS = "in a channel you are not in"  # a host whose last operation the viewer may not see


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
              scope: str = "") -> dict[str, Any]:
    """The App Home: every host's last verdict by group, when, who asked, its thread; ``hidden``: hosts whose
    last operation the viewer may not see, said as such. Past Slack's 100 blocks, each group is a count
    per verdict and only the hosts that did not pass are listed."""
    sections = _home_groups(groups, hosts)
    head: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "Last verdict per host"}},
        context_block(f"{len(hosts)} hosts · updated {slack_date(updated_at)} · refreshed as operations finish "
                      "· `/audit HOST` for more").to_dict(), *([context_block(scope).to_dict()] if scope else [])]
    full: list[dict[str, Any]] = []
    for name, members in sections:
        full.append(section_block(f"*{escape(name)}* ({_hosts(len(members))})").to_dict())
        full.extend(section_block(_home_line(host, last.get(host), workspace_url, hidden)).to_dict()
                    for host in members)
    if len(head) + len(full) <= HOME_BLOCK_LIMIT:
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
                 if host not in last or last[host].verdict != "pass"]
        chunk: list[str] = []
        for line in lines:
            if chunk and len("\n".join([*chunk, line])) > SECTION_LIMIT - 100:
                summary.append(section_block("\n".join(chunk)).to_dict())
                chunk = []
            chunk.append(line)
        if chunk:
            summary.append(section_block("\n".join(chunk)).to_dict())
    room = HOME_BLOCK_LIMIT - len(head) - 1
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
