"""CLI tools beside the operations: ``proofbot ping [TARGET...]`` (hosts or groups) and ``proofbot inventory check``.

Neither changes anything on a host nor writes the audit log: they answer "is my inventory
right, and can proofbot reach what it names?" before anything runs.
"""

from __future__ import annotations

import argparse
import json

from bot.cli.terminal import SCHEMA_VERSION, inventory_of
from bot.plain_text import MARKS, render_ssh_values
from commands.inventory import inventory_path
from commands.inventory.check import check_inventory
from commands.ping import ping_all
from commands.ssh.options import effective


async def run_ping(args: argparse.Namespace) -> int:
    inventory = inventory_of(args)
    hosts = inventory.targets(args.hosts) if args.hosts else [inventory.hosts[n] for n in sorted(inventory.hosts)]
    findings = await ping_all(hosts, inventory.fleet)
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, "hosts": [
            {"host": host.name, **finding.to_json(), **({"ssh": effective(host)} if args.verbose else {})}
            for host, finding in zip(hosts, findings, strict=True)]}, indent=2, ensure_ascii=False))
    else:
        width = max(len(host.name) for host in hosts)
        for host, finding in zip(hosts, findings, strict=True):
            print(f"{MARKS[finding.status]}  {host.name.ljust(width)}  {finding.summary}")
            if args.verbose:
                print(render_ssh_values(effective(host)))
    return 0 if all(finding.status == "pass" for finding in findings) else 3


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
    return 0
