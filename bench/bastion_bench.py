"""Benchmark: a fleet verified through one bastion vs the same hosts reached directly, over a delayed link.

Needs root (tier-2 namespace hosts, see tests/lab/bastion.py). Run: .venv/bin/python -m bench.bastion_bench
Through the bastion, only the bastion's link has the delay (a DelayProxy in front of it); directly,
each host gets its own DelayProxy with the same delay and is routed to through the bastion's netns
by IP (no sshd in between). Prints the median wall time of a fleet verify each way and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan
from commands.verify.fleet import verify_fleet
from tests.lab import require_root_netns
from tests.lab.bastion import BASTION, BastionLab
from tests.lab.proxy import DelayProxy


def via_proxies(lab: BastionLab, proxies: dict[str, DelayProxy], known_hosts: Path, jump: bool) -> Inventory:
    """The lab's inventory with each named host reached at its proxy on 127.0.0.1."""
    document: dict[str, Any] = lab.inventory()
    lines = []
    for name, proxy in proxies.items():
        document["hosts"][name].update(address="127.0.0.1", port=proxy.port)
        lines.append(lab.hosts[name].known_hosts_line("127.0.0.1", proxy.port))
    if not jump:
        for name in lab.behind:
            document["hosts"][name].pop("ssh", None)
    known_hosts.write_text(lab.known_hosts.read_text() + "".join(line + "\n" for line in lines))
    document["ssh"]["known_hosts"] = str(known_hosts)
    return parse_inventory(yaml.safe_dump(document), "bench.yml")


async def fleet_wall_s(inventory: Inventory, names: list[str], db: Path) -> float:
    audit = AuditStore.open(db)
    try:
        fleet = await verify_fleet([VerifyPlan.for_host(inventory.host(name), None) for name in names],
                                   target="bench", origin=Origin.local_user(), audit=audit, fleet=inventory.fleet)
    finally:
        audit.close()
    failing = [(r.host, [f.summary for f in r.checks if f.status != "pass"]) for r in fleet.results
               if r.verdict != "pass"]
    assert not failing, failing
    return fleet.duration_s


async def measure(lab: BastionLab, one_way_s: float, repeats: int) -> dict[str, float]:
    db = lab.workdir / "bench.db"
    through, direct = [], []
    async with contextlib.AsyncExitStack() as stack:
        bastion_proxy = await stack.enter_async_context(
            DelayProxy(lab.bastion.address, 22, delay_s=one_way_s))
        host_proxies = {name: await stack.enter_async_context(
            DelayProxy(lab.hosts[name].address, 22, delay_s=one_way_s)) for name in lab.behind}
        jumped = via_proxies(lab, {BASTION: bastion_proxy}, lab.workdir / "kh_jump", jump=True)
        straight = via_proxies(lab, host_proxies, lab.workdir / "kh_direct", jump=False)
        bastion_logins = []
        for _ in range(repeats):  # alternated, so both ways meet the same machine load
            before = lab.accepted_logins()
            through.append(await fleet_wall_s(jumped, lab.behind, db))
            bastion_logins.append(lab.accepted_logins() - before)
            direct.append(await fleet_wall_s(straight, lab.behind, db))
    return {"rtt_ms": 2000 * one_way_s, "through_s": statistics.median(through), "direct_s": statistics.median(direct),
            "through_min": min(through), "through_max": max(through), "direct_min": min(direct),
            "direct_max": max(direct), "bastion_logins": max(bastion_logins)}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=30)
    parser.add_argument("--rtt-ms", default="50", help="round-trip times to add, comma separated")
    parser.add_argument("--repeats", type=int, default=3)
    return parser.parse_args()


async def main() -> int:
    args = arguments()
    if reason := require_root_netns():
        print(f"bench: skipped: {reason}", file=sys.stderr)
        return 2
    with BastionLab() as lab:
        lab.start_bastion()
        lab.start_behind(args.hosts)
        lab.route_behind_directly()
        rows = [await measure(lab, float(ms) / 2000, args.repeats) for ms in args.rtt_ms.split(",")]
    print(f"fleet verify of {args.hosts} hosts (3 files, watch dir, supervisord service, probe), median of "
          f"{args.repeats}; the added RTT is on the bastion's link, or on each host's link when direct")
    print(f"{'added RTT':>9} | {'through the bastion':>19} {'min-max':>13} {'bastion logins':>14} | "
          f"{'direct':>8} {'min-max':>13} | ratio")
    for row in rows:
        through = f"{row['through_s']:>18.2f}s {row['through_min']:>6.2f}-{row['through_max']:<6.2f}"
        direct = f"{row['direct_s']:>7.2f}s {row['direct_min']:>6.2f}-{row['direct_max']:<6.2f}"
        print(f"{row['rtt_ms']:>6.0f} ms | {through} {row['bastion_logins']:>14.0f} | {direct} | "
              f"{row['through_s'] / row['direct_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
