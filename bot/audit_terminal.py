"""Pure rendering of the audit trail and of a chain check for people at a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from commands.audit import IN_PROGRESS, OperationRecord
from commands.audit_chain import ChainReport
from commands.registry import OPERATIONS

VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "error": "COULD NOT CHECK", IN_PROGRESS: "IN PROGRESS"}
PROBLEM_WORDS = {"edited": "content edited", "deleted": "row deleted", "inserted": "row inserted",
                 "genesis": "genesis wrong", "truncated": "tail truncated", "anchor": "anchor not found"}


def no_thread(via: str | None) -> str:
    """Where an operation with no Slack thread came from (the CLI, the demo)."""
    return f"(from the {via if via and via != 'cli' else 'CLI'}, no thread)"


def verdict_word(verdict: str) -> str:
    return VERDICT_WORDS.get(verdict, verdict.upper())


def approval_words(record: OperationRecord, *, actor: str | None) -> str:
    """'approved by X', 'rejected by X', 'approval expired', or why there is none."""
    if record.decision == "approved":
        return f"approved by {actor}"
    if record.decision == "rejected":
        return f"rejected by {actor}"
    if record.decision == "expired":
        return "approval expired"
    mutating = any(spec.name == record.operation and spec.mutating for spec in OPERATIONS)
    return "no approval recorded" if mutating else "no approval needed"


def when(at: str | None) -> str:
    """'2026-05-22T10:00:00.123Z' as '2026-05-22 10:00:00Z'."""
    if not at:
        return "-"
    return at.replace("T", " ").split(".")[0].rstrip("Z") + "Z"


def render_operations(records: Sequence[OperationRecord], host: str | None) -> str:
    scope = f"for {host}" if host else "across hosts"
    if not records:
        return f"Audit trail {scope}: no operations recorded yet"
    plural = "operation" if len(records) == 1 else "operations"
    lines = [f"Audit trail {scope}: last {len(records)} {plural}, newest first"]
    for record in records:
        lines.append("")
        lines.append(f"{when(record.requested_at)}  {record.operation or '?'} {record.host or '?'}: "
                     f"{verdict_word(record.verdict)}   ({record.operation_id})")
        finished = f" · finished {when(record.finished_at)}" if record.finished_at else ""
        lines.append(f"    requested by {record.requested_by or '?'}"
                     f"{f' via {record.via}' if record.via else ''} · "
                     f"{approval_words(record, actor=record.decided_by)}{finished}")
        if record.channel and record.thread_ts:
            lines.append(f"    thread: Slack channel {record.channel}, thread_ts {record.thread_ts}")
        else:
            lines.append(f"    {no_thread(record.via)}")
    return "\n".join(lines)


def render_chain(report: ChainReport, db: Path) -> str:
    lines: list[str] = []
    if report.broken is None:
        lines.append(f"{report.events} events, chain intact ({db})")
        if report.head_id is not None and report.head_hash is not None:
            lines.append(f"head: event #{report.head_id} {report.head_hash}")
            lines.append(f"  note it elsewhere; later `proofbot audit verify --anchor {report.head_id}:"
                         f"{report.head_hash[:16]}` proves the log still holds it")
    else:
        broken = report.broken
        lines.append(f"chain BROKEN at event #{broken.event_id}: {PROBLEM_WORDS[broken.problem]} ({db})")
        lines.append(f"  {broken.detail}")
        lines.append(f"  {report.events} events checked; only the first broken link is reported")
    if report.missing_guards:
        lines.append("append-only triggers missing (dropped by hand?): " + ", ".join(report.missing_guards))
    return "\n".join(lines)
