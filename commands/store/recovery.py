"""After a bot restart: operations left running are marked interrupted, dead locks released.

An operation is "left running" when it has a ``requested`` event and no ``finished``
one, and is not a plan still waiting for a decision (those stay valid until they expire).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from commands.store import approvals, locks
from commands.store.events import AuditStore

UNFINISHED = """
SELECT r.operation_id, r.operation, r.host, r.details FROM events r
WHERE r.kind = 'requested' AND r.operation_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM events f WHERE f.operation_id = r.operation_id
                  AND f.kind IN ('finished', 'refused', 'cancelled', 'interrupted'))
  AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.id = r.operation_id AND p.state = 'pending')
ORDER BY r.id
"""


@dataclass(frozen=True)
class Interrupted:
    operation_id: str
    operation: str
    host: str
    channel: str | None
    thread_ts: str | None
    last_kind: str
    last_at: str
    last_step: str


async def recover(store: AuditStore) -> tuple[list[Interrupted], list[approvals.PendingPlan]]:
    """Mark every operation left running as interrupted; return them and the plans still pending."""
    def unfinished(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
        return conn.execute(UNFINISHED).fetchall()

    interrupted = []
    for operation_id, operation, host, details in await store.read(unfinished):
        origin = json.loads(details).get("origin") or {}
        events = await store.events_of(operation_id)
        last = events[-1]
        step = last.details.get("name") if isinstance(last.details, dict) else None
        summary = last.details.get("summary", "") if isinstance(last.details, dict) else ""
        record = Interrupted(operation_id, operation, host, origin.get("channel"), origin.get("thread_ts"),
                             last.kind, last.at, f"{step}: {summary}" if step else last.kind)
        await store.append("finished", operation_id=operation_id, operation=operation, host=host, actor="proofbot",
                           details={"verdict": "interrupted", "summary": "proofbot stopped while this ran",
                                    "last_event": {"kind": last.kind, "at": last.at, "step": record.last_step}})
        interrupted.append(record)
        holder = await locks.holder_of(store, host)
        if holder is not None and holder.operation_id == operation_id:
            await locks.release(store, holder)
            await store.append("lock-released-stale", operation_id=operation_id, operation=operation, host=host,
                               actor="proofbot", details={"reason": "operation interrupted by a bot restart",
                                                          "holder": asdict(holder)})
    pending = await store.read(lambda conn: [row[0] for row in conn.execute(
        "SELECT id FROM plans WHERE state = 'pending' ORDER BY created_at")])
    plans = [await approvals.get(store, plan_id) for plan_id in pending]
    for plan in plans:
        await locks.adopt(store, plan.host, plan.id)
    return interrupted, plans
