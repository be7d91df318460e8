"""``proofbot ping [TARGET...]`` (hosts or groups): reach each host, check its key, run ``true``; ``-v`` shows
each SSH value and where it came from. Changes nothing on a host and writes no audit log."""

from __future__ import annotations

import argparse
import json

from bot.cli.marks import MARKS
from bot.cli.output import SCHEMA_VERSION
from bot.cli.results_text import render_ssh_values
from bot.cli.session import inventory_of
from commands.ping import ping_all
from commands.ssh.options import effective
from commands.vocabulary import CheckStatus


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
    return 0 if all(finding.status == CheckStatus.PASS for finding in findings) else 3
