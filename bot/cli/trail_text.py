"""The audit trail as the terminal prints it: ``proofbot audit`` (operations, newest first) and
``proofbot audit verify`` (the hash chain's report)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.typed_command import GIVEN, command_line
from bot.words import approval_words, final_text, fleet_words, no_thread, operation_words, shorten, verdict_word, when

if TYPE_CHECKING:
    from commands.store.chain import ChainReport
    from commands.store.trail import OperationRecord


PROBLEM_WORDS = {"edited": "content edited", "deleted": "row deleted", "inserted": "row inserted",
                 "genesis": "genesis wrong", "truncated": "tail truncated", "anchor": "anchor not found"}


@final_text
def render_operations(records: Sequence[OperationRecord], host: str | None) -> str:
    scope = f"for {host}" if host else "across hosts"
    if not records:
        return f"Audit trail {scope}: no operations recorded yet"
    plural = "operation" if len(records) == 1 else "operations"
    lines = [f"Audit trail {scope}: last {len(records)} {plural}, newest first"]
    for record in records:
        lines.append("")
        lines.append(f"{when(record.requested_at)}  {operation_words(record)}: "
                     f"{verdict_word(record.verdict)}{fleet_words(record)}   ({record.operation_id})")
        finished = f" · finished {when(record.finished_at)}" if record.finished_at else ""
        lines.append(f"    requested by {record.requested_by or '?'}"
                     f"{f' via {record.via}' if record.via else ''} · "
                     f"{approval_words(record, actor=record.decided_by)}{finished}")
        if record.note:  # an interrupted one: who stopped, and what is known (a restart never sent)
            lines.append(f"    {shorten(record.note, 300)}")
        if record.channel and record.thread_ts:
            lines.append(f"    thread: Slack channel {record.channel}, thread_ts {record.thread_ts}")
        else:
            lines.append(f"    {no_thread(record.via)}")
    return "\n".join(lines)


def render_chain(report: ChainReport, db: Path | str) -> str:
    lines: list[str] = []
    if report.broken is None and not report.schema_differences:
        lines.append(f"{report.events} events, chain intact ({db})")
        if report.head_id is not None and report.head_hash is not None:
            lines.append(f"head: event #{report.head_id} {report.head_hash}")
            anchor = command_line("audit", "verify", *GIVEN.get(), "--anchor",  # the anchor last: it is what changes
                                  f"{report.head_id}:{report.head_hash[:16]}", given=())
            lines.append(f"  note it elsewhere; later `{anchor}` proves the log still holds it")
    elif report.broken is not None:
        broken = report.broken
        lines.append(f"chain BROKEN at event #{broken.event_id}: {PROBLEM_WORDS[broken.problem]} ({db})")
        lines.append(f"  {broken.detail}")
        lines.append(f"  {report.events} events checked; only the first broken link is reported")
    if report.schema_differences:
        lines.append("BROKEN: schema differs: " + ", ".join(d.short for d in report.schema_differences)
                     + f" ({db}; {report.events} events, links " + ("intact" if report.broken is None else "broken")
                     + "; compared with what proofbot's migrations create)")
        lines.extend(f"  {d.short}: {shorten(d.sql, 300)}" for d in report.schema_differences if d.sql)
    if report.missing_guards:
        lines.append("append-only triggers missing (dropped by hand?): " + ", ".join(report.missing_guards))
    return "\n".join(lines)
