"""Reading the audit log in order, for the stream and the metrics: events after ``seq`` N (at most K), the
event at one ``seq``, and the chain's length, each in one read snapshot of the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.store.events import Event, event_of, first_row

if TYPE_CHECKING:
    from commands.store.db import AuditStore

MAX_BATCH = 1000  # events read at once, whatever is asked


async def events_after(store: AuditStore, seq: int, limit: int) -> list[Event]:
    """The events whose ``seq`` (the events table's id) is above ``seq``, oldest first, at most ``limit``."""
    count = max(1, min(limit, MAX_BATCH))
    return await store.snapshot(lambda db: [
        event_of(row) for row in db.query("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", [seq, count])])


async def hash_at(store: AuditStore, seq: int) -> str | None:
    """The hash of the event at ``seq``, or None when there is none."""
    row = await store.snapshot(lambda db: first_row(db, "SELECT hash FROM events WHERE id = ?", seq))
    return None if row is None else str(row["hash"])


async def chain_length(store: AuditStore) -> int:
    """Events appended to the chain: the head's count, moved by a trigger on every append (one row, so a scrape
    costs the same at any size of the log)."""
    row = await store.snapshot(lambda db: first_row(db, "SELECT events FROM chain_head WHERE id = 1"))
    return int(row["events"]) if row is not None else 0
