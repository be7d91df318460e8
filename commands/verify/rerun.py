"""Re-verify the hosts that did not pass in a fleet verify: who they were is read from the audit log.

The fleet operation's ``finished`` event names each host's own verify (an interrupted fleet's
does not: then each host's own ``requested`` event names the fleet); each of those says its
verdict and the backup it compared, and a host that never started did not pass. Nothing a
click carries besides the fleet operation id is used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from commands.errors import Refused
from commands.store.db import AuditStore
from commands.store.events import sql_list
from commands.vocabulary import EventKind, Operation, Verdict

if TYPE_CHECKING:
    from commands.store.handle import Db

READ_KINDS = (EventKind.REQUESTED, EventKind.FINISHED)


@dataclass(frozen=True)
class NotPassing:
    """The hosts of a fleet verify whose verdict was not pass, in the fleet's order, with the backup each compared."""

    fleet_operation_id: str
    hosts: list[str]
    backups: dict[str, str | None]
    of_total: int


async def not_passing(audit: AuditStore, fleet_operation_id: str) -> NotPassing:
    """Refused when the id is not a finished fleet verify, or when every host passed."""
    events = await audit.events_of(fleet_operation_id)
    requested = next((e for e in events if e.kind == EventKind.REQUESTED and e.operation == Operation.VERIFY
                      and e.host is None and isinstance(e.details.get("fleet"), dict)), None)
    if requested is None:
        raise Refused(f"{fleet_operation_id!r} is not a fleet verify in the audit log: nothing to re-verify")
    finished = next((e for e in events if e.kind == EventKind.FINISHED), None)
    if finished is None:
        raise Refused(f"fleet verify {fleet_operation_id} has not finished: re-verify once it has")
    asked = [str(host) for host in requested.details["fleet"].get("hosts") or []]
    if isinstance(finished.details.get("hosts"), dict):
        per_host: dict[str, str] = {str(h): str(op) for h, op in finished.details["hosts"].items()}
    else:  # interrupted (proofbot stopped mid-run): each host's own verify names the fleet it was part of
        per_host = await audit.snapshot(lambda db: _parts_of(db, fleet_operation_id))
    outcomes = await audit.snapshot(lambda db: _outcomes(db, list(per_host.values())))
    order = asked or list(per_host)  # a host never started has no verify of its own: it did not pass either
    hosts = [host for host in order
             if host not in per_host or outcomes.get(per_host[host], (None, None))[0] != Verdict.PASS]
    if not hosts:
        raise Refused(f"every host passed in fleet verify {fleet_operation_id}: nothing to re-verify")
    planned = requested.details["fleet"].get("backups") or {}
    return NotPassing(fleet_operation_id, hosts,
                      {h: outcomes.get(per_host[h], (None, None))[1] if h in per_host else planned.get(h)
                       for h in hosts},
                      len(order))


def _parts_of(db: Db, fleet_operation_id: str) -> dict[str, str]:
    """host -> its own verify's operation id, for the hosts of a fleet verify that started."""
    rows = db.query(
        f"SELECT host, operation_id FROM events WHERE kind = '{EventKind.REQUESTED}' AND host IS NOT NULL "
        "AND json_extract(details, '$.fleet_operation_id') = ? ORDER BY id", [fleet_operation_id])
    return {str(row["host"]): str(row["operation_id"]) for row in rows}


def _outcomes(db: Db, operation_ids: list[str]) -> dict[str, tuple[str | None, str | None]]:
    """operation id -> (verdict, backup compared), one query for the whole fleet."""
    if not operation_ids:
        return {}
    rows = [(row["operation_id"], row["kind"], row["details"]) for row in db.query(
        f"SELECT operation_id, kind, details FROM events WHERE kind IN {sql_list(READ_KINDS)} "
        f"AND operation_id IN ({', '.join('?' for _ in operation_ids)}) ORDER BY id", operation_ids)]
    verdicts: dict[str, str | None] = {}
    backups: dict[str, str | None] = {}
    for operation_id, kind, details in rows:
        data = json.loads(details) if details else {}
        if kind == EventKind.FINISHED:
            verdicts[operation_id] = data.get("verdict")
        else:
            backups[operation_id] = data.get("backup")
    return {op: (verdicts.get(op), backups.get(op)) for op in operation_ids}
