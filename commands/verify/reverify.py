"""Re-verify the hosts that did not pass in a fleet verify, as a new fleet verify planned here, in the core.

Who they were, and the backup each compared, is read from the audit log (``commands.verify.rerun``:
nothing a click carries besides the fleet operation id is used); each is looked up in today's
inventory and planned again with that backup. A host gone from the inventory is left out and said;
a backup removed since is compared with nothing else (said, per host). A front-end only runs the
``FleetRequest`` this returns (``commands.verify.fleet.verify_fleet``).
"""

from __future__ import annotations

from commands.errors import Refused
from commands.inventory import Inventory
from commands.store.db import AuditStore
from commands.verify.fleet import FleetRequest
from commands.verify.plan import FleetPlan, VerifyPlan, plan_fleet
from commands.verify.rerun import NotPassing, not_passing


async def reverify_request(inventory: Inventory, audit: AuditStore, fleet_operation_id: str) -> FleetRequest:
    """The not-passing hosts of ``fleet_operation_id`` as a new fleet verify; Refused when the id is not a
    finished fleet verify, when every host passed, or when none of those hosts is in the inventory now."""
    return _request_of(inventory, await not_passing(audit, fleet_operation_id))


def _request_of(inventory: Inventory, failed: NotPassing) -> FleetRequest:
    """The hosts that did not pass, looked up in today's inventory; each with the backup it compared."""
    hosts = [inventory.hosts[name] for name in failed.hosts if name in inventory.hosts]
    if not hosts:
        raise Refused(f"none of the {len(failed.hosts)} hosts that did not pass in {failed.fleet_operation_id} "
                      "is in the inventory any more")
    plans: list[VerifyPlan] = []
    without: dict[str, str] = {}
    for host in hosts:
        backup = failed.backups.get(host.name)
        if backup is not None and backup not in host.backups:  # removed since: compare nothing else instead
            plans.append(VerifyPlan(host, None, None))
            without[host.name] = f"no backup {backup} any more"
            continue
        one = plan_fleet([host], backup)
        plans += one.plans
        without.update(one.without_backup)
    gone = len(failed.hosts) - len(hosts)
    target = f"the {len(hosts)} not passing in {failed.fleet_operation_id}"
    if gone:
        target += f" ({gone} no longer in the inventory)"
    return FleetRequest(target, FleetPlan(plans, without))
