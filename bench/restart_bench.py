"""Benchmark: how soon after a restarted service becomes ready does proofbot report it ready?

Needs root (it starts a namespace host, see tests/lab). The host's service answers /health
503 for ``--startup-delay`` seconds after each start and logs the moment it turns ready
("fake-llm pid N ready at EPOCH", host clock = this machine's clock). proofbot restarts it
and reports readiness through ``on_progress``; the difference is the reporting latency.

Run: .venv/bin/python -m bench.restart_bench [--delays-ms 0,25,50] [--repeats 3] [--startup-delay 3]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from pathlib import Path

import yaml

from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.restart import RestartProgress, plan_restart, restart
from commands.store.db import AuditStore
from tests.lab import require_root_netns
from tests.lab.common import BaseLab, Scenario
from tests.lab.netns import NetnsLab
from tests.lab.proxy import DelayProxy

HOST = "ct190"
SERVICE_LOG = "/var/log/supervisor/sglang.log"


def ready_epoch(lab: BaseLab, pid: int) -> float:
    """When the service with this PID turned ready, as it logged it on the host."""
    text = lab[HOST].local_path(SERVICE_LOG).read_text(errors="replace")
    found = re.findall(rf"fake-llm pid {pid} ready at ([0-9.]+)", text)
    if not found:
        raise RuntimeError(f"no readiness line for PID {pid} in {SERVICE_LOG}")
    return float(found[-1])


async def one_restart(lab: BaseLab, delay_s: float, db: Path) -> dict[str, float]:
    lab_host = lab[HOST]
    async with DelayProxy(lab_host.address, lab_host.port, delay_s=delay_s) as proxy:
        known_hosts = db.parent / f"known_hosts_{proxy.port}"
        known_hosts.write_text(lab_host.known_hosts_line("127.0.0.1", proxy.port) + "\n")
        document = lab.inventory()
        document["hosts"][HOST].update({"address": "127.0.0.1", "port": proxy.port})
        document["ssh"]["known_hosts"] = str(known_hosts)
        host = parse_inventory(yaml.safe_dump(document), "bench.yml").host(HOST)
        plan = await plan_restart(host)
        reported: list[float] = []

        async def note(progress: RestartProgress) -> None:
            if progress.ready_after_s is not None and not reported:
                reported.append(time.time())

        audit = AuditStore.open(db)
        result = await restart(plan, origin=Origin.local_user(), audit=audit, on_progress=note, settle_s=0.5)
        audit.close()
    if result.verdict != "pass" or not reported or result.extra["new_pid"] is None:
        raise RuntimeError(f"restart did not pass: {[f.to_json() for f in result.checks if f.status != 'pass']}")
    became_ready = ready_epoch(lab, int(result.extra["new_pid"]))
    return {"latency_ms": (reported[0] - became_ready) * 1000, "ready_after_s": result.extra["ready_after_s"]}


async def measure_readiness(lab: BaseLab, delay_s: float, repeats: int, db: Path) -> dict[str, float]:
    runs = [await one_restart(lab, delay_s, db) for _ in range(repeats)]
    latencies = [run["latency_ms"] for run in runs]
    return {"delay_ms": delay_s * 1000, "median_ms": statistics.median(latencies), "max_ms": max(latencies),
            "min_ms": min(latencies), "ready_after_s": statistics.median(run["ready_after_s"] for run in runs)}


def start_host(lab: BaseLab, startup_delay_s: float) -> None:
    lab.start([HOST], per_host={HOST: Scenario(startup_delay_s=startup_delay_s)})


def print_rows(rows: list[dict[str, float]], startup_delay_s: float, repeats: int) -> None:
    print(f"restart of a supervisord service that becomes ready {startup_delay_s:g} s after it starts; "
          f"median of {repeats}; polls every 0.25 s over one SSH connection")
    for row in rows:
        print(f"  one-way delay {row['delay_ms']:>4.0f} ms: readiness reported {row['median_ms']:.0f} ms after the "
              f"service became ready (min {row['min_ms']:.0f}, max {row['max_ms']:.0f}; "
              f"ready_after_s {row['ready_after_s']:.2f})")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delays-ms", default="0,25,50", help="one-way delays to add, comma separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--startup-delay", type=float, default=3.0, help="seconds the service takes to be ready")
    args = parser.parse_args()
    reason = require_root_netns()
    if reason:
        print(f"bench: skipped: {reason}", file=sys.stderr)
        return 2
    with NetnsLab() as lab:
        start_host(lab, args.startup_delay)
        db = lab.workdir / "bench.db"
        rows = [await measure_readiness(lab, float(ms) / 1000, args.repeats, db) for ms in args.delays_ms.split(",")]
    print_rows(rows, args.startup_delay, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
