"""``/restart GROUP`` (a rolling restart) in Block Kit: the one plan for the group, every host's PID under its
command line packed into Slack's limits, its status while it runs, the result, and one reply per host."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import Block, ButtonElement, ConfirmObject

from bot.restart_text import ROLLOUT_MARKS
from bot.slack.blocks import (
    SECTION_LIMIT,
    Message,
    approval_footer,
    as_dicts,
    context_block,
    escape,
    section_block,
)
from bot.slack.emoji import ROLLOUT_EMOJI
from bot.slack.thread_blocks import verdict_message
from bot.words import ROLLOUT_WORDS, rollout_proof_words, shorten, shorten_middle
from commands.fleet.names import compress_names
from commands.restart.plan import RestartPlan
from commands.restart.rollout import HostOutcome, RolloutPlan, RolloutResult

ROLLOUT_APPROVE = "rollout_approve"
ROLLOUT_REJECT = "rollout_reject"
ROLLOUT_LIST_SECTIONS = 4  # the host list's share of a message: ~11,600 characters, the rest in the file
ROLLOUT_FILE_OVER = 20  # more hosts than this: the whole plan is attached to the thread as a file


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


def rollout_plan_message(plan: RolloutPlan, requester: str, expires_at: str, approvers: Sequence[str],
                         required: int = 1) -> Message:
    count = len(plan.hosts)
    confirm = ConfirmObject(title="Start the rolling restart?", confirm="Restart all", deny="Cancel",
                            text=f"Restart {count} hosts of {plan.target}, {plan.restart_batch} at a time, each "
                                 "proven before the next; it halts at the first host not proven.")
    blocks = [*_rollout_head(plan, requester),
              *approval_footer(plan, expires_at, approvers,
                               ButtonElement(text="Approve", action_id=ROLLOUT_APPROVE, value=plan.operation_id,
                                             style="primary", confirm=confirm),
                               ButtonElement(text="Reject", action_id=ROLLOUT_REJECT, value=plan.operation_id,
                                             style="danger"), required=required)]
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
