"""A rolling restart as the terminal prints it: each host's line as it is done, and the result (done,
failed, untouched); the plan is ``bot.restart_text``'s (Slack attaches the same text)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.cli.results_text import render_result
from bot.restart_text import BAD, OK
from bot.words import ROLLOUT_WORDS, VERDICT_WORDS, final_text
from commands.fleet.names import compress_names

if TYPE_CHECKING:
    from commands.restart.rollout import HostOutcome, RolloutResult


@final_text
def rollout_host_done_line(outcome: HostOutcome) -> str:
    result = outcome.result
    if result is None:
        return f"  - {outcome.host} not restarted: {outcome.reason}"
    old, new = result.extra.get("old_pid"), result.extra.get("new_pid")
    if outcome.state == "done":
        ready = result.extra.get("ready_after_s")
        return (f"  {OK} {outcome.host} restarted and proven: PID {old} → {new}"
                + (f", ready {ready:.2f} s" if ready is not None else ""))
    return f"  {BAD} {outcome.host} {VERDICT_WORDS[result.verdict]}: {outcome.reason or 'not proven'}"


@final_text
def render_rollout_result(result: RolloutResult, *, verbose: bool = False) -> str:
    lines = [f"proofbot restart {result.target}: {ROLLOUT_WORDS[result.verdict]} "
             f"({len(result.hosts)} hosts in {result.duration_s:.1f} s, operation {result.operation_id})"]
    if result.halted:
        lines.append(f"  {result.halted}")
    for state in ("done", "failed", "untouched"):
        names = result.named(state)
        lines.append(f"  {state + ' (' + str(len(names)) + '):':<16}{compress_names(names) or '-'}")
    for outcome in result.hosts:
        if outcome.result is not None and (verbose or outcome.state == "failed"):
            lines.append("")
            lines.append(render_result(outcome.result, verbose=verbose))
    return "\n".join(lines)
