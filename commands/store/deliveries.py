"""Slack deliveries claimed once across every replica: a row keyed by the delivery's id (an Events API
``event_id``, else a digest of the payload), inserted before anything runs; a retry finds it and starts nothing.

Rows older than KEEP_S go as new ones come (Slack retries within minutes), so the table stays small. A claim
whose handling wrote nothing before it failed (its first write refused, the database gone) is released, so
Slack's retry runs it (docs/deployment.md "Two replicas behind Socket Mode").
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from commands.errors import CouldNotRecord
from commands.store.db import AuditStore, WriteTally
from commands.store.leases import process_holder

if TYPE_CHECKING:
    from commands.store.handle import Db

KEEP_S = 3600.0


def claim_in(db: Db, delivery_id: str, kind: str, now: float | None = None) -> bool:
    """In the caller's write transaction: True if this delivery is new (claimed now), False if seen before."""
    return claim_all_in(db, [(delivery_id, kind)], now)[0]


def claim_all_in(db: Db, deliveries: list[tuple[str, str]], now: float | None = None) -> list[bool]:
    """Several (id, kind) claimed in the caller's write transaction by one INSERT: for each, True if claimed now;
    an id seen before, or earlier in the same list, is False (its first occurrence alone is claimed)."""
    moment = time.time() if now is None else now
    db.execute("DELETE FROM deliveries WHERE claimed_at < ?", [moment - KEEP_S])
    # The primary key decides between two replicas claiming at once (on PostgreSQL the second INSERT waits for the
    # first's transaction, then does nothing); no chain lock is needed (AuditStore.write_apart).
    fresh = list(dict.fromkeys(delivery_id for delivery_id, _ in deliveries))
    kinds = dict(reversed(deliveries))  # each id's first kind
    rows = ", ".join(["(?, ?, ?, ?)"] * len(fresh))
    values = [v for delivery_id in fresh for v in (delivery_id, kinds[delivery_id], moment, process_holder())]
    claimed = {row["id"] for row in db.query(f"INSERT INTO deliveries (id, kind, claimed_at, replica) VALUES {rows} "
                                             "ON CONFLICT (id) DO NOTHING RETURNING id", values)}
    firsts: set[str] = set()
    result = []
    for delivery_id, _ in deliveries:
        result.append(delivery_id in claimed and delivery_id not in firsts)
        firsts.add(delivery_id)
    return result


async def claim(store: AuditStore, delivery_id: str, kind: str) -> bool:
    return await store.write_apart(lambda db: claim_in(db, delivery_id, kind))


def unclaim_in(db: Db, delivery_id: str) -> None:
    """This process's claim of the delivery goes (another replica's is left alone)."""
    db.execute("DELETE FROM deliveries WHERE id = ? AND replica = ?", [delivery_id, process_holder()])


async def release_unstarted(store: AuditStore, delivery_id: str, tally: WriteTally) -> bool:
    """After the handling of a claimed delivery failed: release the claim if nothing was written since (nothing
    started, so a retry may run it); True if released now or, the database being away, once it is back."""
    if tally.writes:
        return False
    try:
        await store.write(lambda db: unclaim_in(db, delivery_id))
    except CouldNotRecord:  # released by the store's next settling turn (commands/store/recovery.py)
        store.unclaimed.add(delivery_id)
    return True
