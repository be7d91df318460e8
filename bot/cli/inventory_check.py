"""``proofbot inventory check``: every problem in the inventory at once (``FILE:LINE: KEY``), connecting to
nothing, or a one-line summary of what it holds. Changes nothing on a host and writes no audit log."""

from __future__ import annotations

import argparse
import json

from bot.cli.output import SCHEMA_VERSION
from commands.inventory import inventory_path
from commands.inventory.check import check_inventory
from commands.inventory.policies import unchecked_groups


async def run_inventory(args: argparse.Namespace) -> int:
    path = inventory_path(getattr(args, "inventory", None))
    # raises, naming the file, line and key of each problem: a file that is not valid, and what would
    # fail only later (missing key or known_hosts files, a host verify has nothing to prove on)
    inventory = check_inventory(path)
    hosts = inventory.hosts.values()
    services = sum(1 for host in hosts if host.service)
    backups = sum(len(host.backups) for host in hosts)
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, "inventory": str(path), "valid": True,
                          "hosts": sorted(inventory.hosts), "groups": sorted(inventory.groups),
                          "services": services, "backups": backups,
                          "approvers": inventory.approvals.approvers}, indent=2, ensure_ascii=False))
        return 0
    print(f"{path}: valid: {len(inventory.hosts)} host(s) "
          f"({', '.join(sorted(inventory.hosts))}), {services} service(s), {backups} backup(s), "
          f"approvers: {', '.join(inventory.approvals.approvers) or 'none'}")
    if groups := unchecked_groups(inventory.policies):
        print(f"policies: {len(inventory.policies)}; user groups {', '.join(groups)}: members not checked "
              "(needs Slack: the App Home shows them)")
    return 0
