"""What the watch leaves in the audit log: one compact ``watch-run`` per target run (counts, changed hosts); on a
change only, each changed host's ``watch-change`` and its verify's whole trail (so the evidence a message cites
is in the log), under a fleet verify a Re-verify button can name. Each run's verifies write to a scratch store."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from commands.clock import utc_at
from commands.fleet.grouping import outcome_of
from commands.inventory import Inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.kinds import Finished, WatchChange, WatchRun
from commands.store.log import audit_log
from commands.verify.plan import plan_fleet
from commands.vocabulary import Operation
from commands.watch.memory import change_json, pending_json
from commands.watch.schedule import TargetRun
from commands.watch.state import HostChange


@asynccontextmanager
async def scratch_store() -> AsyncIterator[AuditStore]:
    """An in-memory audit store for one run's verifies: what is kept of them is copied out by ``record``."""
    store = AuditStore.open(Path(":memory:"))
    try:
        yield store
    finally:
        store.close()


@dataclass
class WatchAudit:
    """The watch's writer into the real audit log."""

    store: AuditStore
    inventory: Inventory
    origin: Origin
    # False when each run's verifies already wrote their whole trail to this log (``proofbot watch --once``):
    # a change then names that verify, and nothing is written twice.
    trails: bool = True

    async def record(self, run: TargetRun) -> None:
        """After each run (``Watch.on_run``): the compact event, and the trails of the hosts that changed."""
        fleet = run.fleet
        by_host = {result.host: result for result in fleet.results}
        changed = [change for change in run.changes if change.host in by_host]
        actor = self.origin.actor
        if changed and not self.trails:
            for change in changed:
                await audit_log(self.store, Operation.WATCH, fleet.operation_id, change.host, actor).watch_change(
                    _change_event(change, by_host[change.host].operation_id))
        elif changed:
            hosts = [change.host for change in changed]
            backups = {plan.host.name: plan.backup_name
                       for plan in plan_fleet([self.inventory.hosts[host] for host in hosts], None).plans}
            fleet_log = audit_log(self.store, Operation.VERIFY, fleet.operation_id, None, actor)
            await fleet_log.requested(self.origin, fleet={"target": fleet.target, "hosts": hosts, "backups": backups})
            for change in changed:
                result = by_host[change.host]
                host_log = audit_log(self.store, Operation.VERIFY, result.operation_id, result.host, actor)
                await host_log.requested(self.origin, backup=backups.get(result.host),
                                         checks=[finding.name for finding in result.checks],
                                         fleet_operation_id=fleet.operation_id)
                for finding in result.checks:
                    await host_log.check(finding)
                await host_log.finished(Finished.of(result))
                await audit_log(self.store, Operation.WATCH, fleet.operation_id, change.host, actor).watch_change(
                    _change_event(change, result.operation_id))
            parts = [by_host[host] for host in hosts]
            await fleet_log.finished(Finished(fleet.verdict, duration_s=round(fleet.duration_s, 3),
                                              counts=dict(sorted(Counter[str](map(outcome_of, parts)).items())),
                                              hosts={part.host: part.operation_id for part in parts}))
        counts = Counter[str](outcome_of(result) for result in fleet.results)
        await audit_log(self.store, Operation.WATCH, fleet.operation_id, None, actor).watch_run(
            WatchRun(run.target, dict(sorted(counts.items())), [change.host for change in changed],
                     held=run.held or None, pending=pending_json(run.pending),
                     digest=[change_json(change) for change in run.digest] or None,
                     watching_since=utc_at(run.watching_since.timestamp()) if run.watching_since else None))


def _change_event(change: HostChange, verify_operation_id: str) -> WatchChange:
    return WatchChange(change.change, change.now.verdict, sorted(change.now.causes), utc_at(change.since.timestamp()),
                       verify_operation_id)
