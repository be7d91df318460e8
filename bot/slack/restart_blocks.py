"""``/restart HOST`` in Block Kit: the plan with its Approve button, its status and live progress line while
it runs, and the "Restart now" offer after a restore or verify found the service on old code."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement, ConfirmObject

from bot.restart_text import progress_line, render_restart_plan
from bot.slack.blocks import Message, approval_footer, as_dicts, code_block, context_block, escape, section_block
from commands.restart.plan import RestartPlan
from commands.restart.watch import RestartProgress

RESTART_APPROVE = "restart_approve"
RESTART_REJECT = "restart_reject"
RESTART_NOW = "restart_now"


def _head(plan: RestartPlan, requester: str) -> list[Block]:
    service = plan.service
    head = (f":arrows_counterclockwise: *Restart plan for {escape(plan.host.name)}* ({escape(service.unit)}, "
            f"{service.manager}), requested by <@{requester}>")
    return [section_block(head), section_block(code_block(render_restart_plan(plan, title=False)))]


def restart_plan_message(plan: RestartPlan, requester: str, expires_at: str, approvers: Sequence[str],
                         required: int = 1) -> Message:
    confirm = ConfirmObject(title="Restart now?", confirm="Restart", deny="Cancel",
                            text=f"Restart {plan.service.unit} on {plan.host.name}, then prove it came back right.")
    blocks = [*_head(plan, requester),
              *approval_footer(plan, expires_at, approvers,
                               ButtonElement(text="Approve", action_id=RESTART_APPROVE, value=plan.operation_id,
                                             style="primary", confirm=confirm),
                               ButtonElement(text="Reject", action_id=RESTART_REJECT, value=plan.operation_id,
                                             style="danger"), required=required)]
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
