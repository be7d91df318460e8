"""Which hosts proofbot itself is working on (a restore or restart holding the host's lock), and for
``service.ready_timeout_s`` after: the watch says nothing about them then (their change is not drift)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from commands.inventory import Inventory
from commands.store.db import AuditStore
from commands.store.locks import holder_of


@dataclass
class LockHolds:
    """Seen at each run: a host whose lock is held is held until now + its ready time, and stays held that
    long after the lock is gone (remembered here, so a release between two runs still counts)."""

    inventory: Inventory
    audit: AuditStore
    until: dict[str, datetime] = field(default_factory=dict)

    def hold(self, host: str, until: datetime) -> None:
        """Held until then at least (serve's own restart says so as it ends)."""
        self.until[host] = max(until, self.until.get(host, until))

    async def __call__(self, hosts: Sequence[str], now: datetime) -> Mapping[str, datetime]:
        for host in hosts:
            if await holder_of(self.audit, host) is not None:
                service = self.inventory.hosts[host].service
                ready = timedelta(seconds=service.ready_timeout_s if service is not None else 0)
                self.hold(host, now + ready)
        return {host: self.until[host] for host in hosts if host in self.until and now < self.until[host]}
