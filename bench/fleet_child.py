"""proofbot's fleet verify in a fresh process, for bench/fleet_bench.py (when the CLI cannot take many targets).

The same core the CLI calls (``commands.verify.fleet.verify_fleet``: bounded fan-out, a
deadline per host, every check in the audit log), without the terminal rendering. It imports
``bot.cli.main`` first, so its start-up costs what ``proofbot verify`` costs.

Run by the bench: python -m bench.fleet_child INVENTORY DB TARGET...
Prints one JSON line: the fleet verdict, hosts per outcome and exec round trips per host.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import bot.cli.main  # noqa: F401  (the CLI's own import cost, see the docstring)
from commands.inventory import load_inventory
from commands.operation import Origin
from commands.store.events import AuditStore
from commands.verify import VerifyPlan
from commands.verify.fleet import verify_fleet


async def main(inventory_path: str, db: str, targets: list[str]) -> int:
    inventory = load_inventory(Path(inventory_path))
    plans = [VerifyPlan.for_host(host, None) for host in inventory.targets(targets)]
    audit = AuditStore.open(Path(db))
    try:
        result = await verify_fleet(plans, target=" ".join(targets), origin=Origin.local_user(), audit=audit,
                                    fleet=inventory.fleet)
    finally:
        audit.close()
    print(json.dumps({"verdict": result.verdict, "counts": dict(result.counts()),
                      "round_trips": sorted({r.stats.get("exec_round_trips", 0) for r in result.results}),
                      "not_pass": {r.host: [f.summary for f in r.checks if f.status != "pass"]
                                   for r in result.results if r.verdict != "pass"}}))
    return 0 if result.verdict == "pass" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:])))
