"""Slack deliveries claimed once across every replica: a row keyed by the delivery's id (an Events API
``event_id``, else a digest of the payload), inserted before anything runs; a retry finds it and starts nothing.

Rows older than KEEP_S go as new ones come (Slack retries within minutes), so the table stays small.
"""

from __future__ import annotations

import time
from typing import Any

from commands.store.db import AuditStore
from commands.store.leases import process_holder

KEEP_S = 3600.0


def claim_in(db: Any, delivery_id: str, kind: str, now: float | None = None) -> bool:
    """In the caller's write transaction: True if this delivery is new (claimed now), False if seen before."""
    moment = time.time() if now is None else now
    db.execute("DELETE FROM deliveries WHERE claimed_at < ?", [moment - KEEP_S])
    # The primary key decides between two replicas claiming at once (on PostgreSQL the second INSERT waits for the
    # first's transaction, then does nothing); no chain lock is needed (AuditStore.write_apart).
    claimed = list(db.query("INSERT INTO deliveries (id, kind, claimed_at, replica) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT (id) DO NOTHING RETURNING id",
                            [delivery_id, kind, moment, process_holder()]))
    return bool(claimed)


async def claim(store: AuditStore, delivery_id: str, kind: str) -> bool:
    return await store.write_apart(lambda db: claim_in(db, delivery_id, kind))
