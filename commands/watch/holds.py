"""Which hosts proofbot itself is working on (a restore or restart holding the host's lock), and for
``service.ready_timeout_s`` after it ends: the watch says nothing about them then (their change is not drift)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from commands.inventory import Inventory
from commands.store.db import AuditStore
from commands.store.locks import holder_in
from commands.vocabulary import EventKind, Operation

if TYPE_CHECKING:
    from commands.store.handle import Db

# What proofbot does to a host that moves its state: a verify or a ping changes nothing.
MUTATING = (Operation.RESTORE, Operation.RESTART, Operation.ROLLOUT)
# A host whose lock is held is held at least this long past the run that saw it (a service without a
# ready_timeout_s would otherwise be held "until now": not at all).
_WHILE_LOCKED = timedelta(seconds=1)


@dataclass
class LockHolds:
    """At each run: a host whose lock is held is held until now + its ready time; a host whose last restore or
    restart finished (the audit log's ``finished``) is held until then + its ready time."""

    inventory: Inventory
    audit: AuditStore
    until: dict[str, datetime] = field(default_factory=dict)

    def hold(self, host: str, until: datetime) -> None:
        """Held until then at least."""
        self.until[host] = max(until, self.until.get(host, until))

    def _ready(self, host: str) -> timedelta:
        service = self.inventory.hosts[host].service
        return timedelta(seconds=service.ready_timeout_s if service is not None else 0)

    async def __call__(self, hosts: Sequence[str], now: datetime) -> Mapping[str, datetime]:
        # one read of the store for the whole target (a round trip per host was most of a 100-host run's time)
        locked, ended_at = await self.audit.snapshot(lambda db: (
            [host for host in hosts if holder_in(db, host) is not None], _last_mutation(db, list(hosts))))
        for host in locked:  # held through this run whatever its ready time
            self.hold(host, now + max(self._ready(host), _WHILE_LOCKED))
        for host, ended in ended_at.items():
            self.hold(host, datetime.fromisoformat(ended.replace("Z", "+00:00")) + self._ready(host))
        return {host: self.until[host] for host in hosts if host in self.until and now < self.until[host]}


def _last_mutation(db: Db, hosts: list[str]) -> dict[str, str]:
    """host -> when its last restore or restart (a rollout's part too) finished, for the hosts that had one."""
    if not hosts:
        return {}
    operations = ", ".join(f"'{operation}'" for operation in MUTATING)
    rows = db.query(
        f"SELECT host, max(at) AS ended FROM events WHERE kind = '{EventKind.FINISHED}' "
        f"AND operation IN ({operations}) AND host IN ({', '.join('?' for _ in hosts)}) GROUP BY host", hosts)
    return {str(row["host"]): str(row["ended"]) for row in rows}
