"""A ``watch`` entry's target verified through the fleet verify (its bounded fan-out, a deadline per host)."""

from __future__ import annotations

from commands.inventory import Inventory
from commands.inventory.watch import WatchEntry
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify.fleet import FleetResult, verify_fleet
from commands.verify.plan import plan_fleet
from commands.watch.audit import scratch_store
from commands.watch.schedule import VerifyTarget


def fleet_verifier(inventory: Inventory, audit: AuditStore | None, origin: Origin) -> VerifyTarget:
    """Verify an entry's hosts as ``proofbot verify TARGET`` would (each host's only backup, the probe sent).
    ``audit`` None: each run's trail goes to a scratch store (``WatchAudit`` keeps what changed)."""

    async def verify_target(entry: WatchEntry) -> FleetResult:
        planned = plan_fleet(inventory.targets([entry.target]), None)
        if audit is not None:
            return await verify_fleet(planned.plans, target=entry.target, origin=origin, audit=audit,
                                      fleet=inventory.fleet, without_backup=planned.without_backup)
        async with scratch_store() as scratch:
            return await verify_fleet(planned.plans, target=entry.target, origin=origin, audit=scratch,
                                      fleet=inventory.fleet, without_backup=planned.without_backup)

    return verify_target
