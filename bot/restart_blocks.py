"""Pure Block Kit rendering of restarts: the plan with its buttons, live progress, the outcome."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement, ConfirmObject

from bot.blocks import Message, as_dicts, code_block, context_block, escape, section_block
from bot.restart_view import plan_text, progress_line
from commands.restart_plan import RestartPlan
from commands.restart_watch import RestartProgress

APPROVE = "restart_approve"
REJECT = "restart_reject"
RESTART_NOW = "restart_now"


def _head(plan: RestartPlan, requester: str) -> list[Block]:
    service = plan.service
    head = (f":arrows_counterclockwise: *Restart plan for {escape(plan.host.name)}* ({escape(service.unit)}, "
            f"{service.manager}), requested by <@{requester}>")
    return [section_block(head), section_block(code_block(plan_text(plan)))]


def restart_plan_message(plan: RestartPlan, requester: str, expires_at: str, approvers: Sequence[str]) -> Message:
    who = ", ".join(f"<@{a}>" for a in approvers) or "nobody (no approvers configured)"
    confirm = ConfirmObject(title="Restart now?", confirm="Restart", deny="Cancel",
                            text=f"Restart {plan.service.unit} on {plan.host.name}, then prove it came back right.")
    blocks = [*_head(plan, requester),
              context_block(f"plan `{plan.plan_hash[:12]}` · operation `{plan.operation_id}` · expires {expires_at}"
                            f" · approvers: {who}"),
              ActionsBlock(elements=[
                  ButtonElement(text="Approve", action_id=APPROVE, value=plan.operation_id, style="primary",
                                confirm=confirm),
                  ButtonElement(text="Reject", action_id=REJECT, value=plan.operation_id, style="danger")])]
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
