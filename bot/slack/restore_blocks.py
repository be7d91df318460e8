"""``/restore`` in Block Kit: planning, the plan with its Approve buttons, the plan once decided, each file's
diff, and "nothing to restore"."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement, ConfirmObject, ContextBlock, MarkdownTextObject

from bot.slack.blocks import (
    SECTION_LIMIT,
    Message,
    approvers_words,
    as_dicts,
    code_block,
    escape,
    section_block,
    slack_date,
)
from commands.restore.plan import FileState, RestorePlan

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


def restore_plan_message(plan: RestorePlan, requester: str, expires_at: str, approvers: Sequence[str],
                         required: int = 1) -> Message:
    blocks = plan_summary_blocks(plan, requester)
    who = approvers_words(approvers, required)
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
