"""Benchmark: proofbot verify vs the seed's way (one `ssh` per check) over a delayed link.

Needs root (it starts a namespace host, see tests/lab). Run: .venv/bin/python -m bench.verify_bench
Prints connections opened, exec round trips and wall time for each one-way delay.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from bench import restart_bench
from commands.checks.cmdline import cmdline_argv
from commands.checks.file_times import listing_argv, listing_paths
from commands.checks.files import file_hash_argv
from commands.checks.service import service_state_argv
from commands.inventory import Host, parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab import require_root_netns
from tests.lab.common import LabHost
from tests.lab.netns import NetnsLab
from tests.lab.proxy import DelayProxy

READY_DELAY_S = 3.0  # the restarted service's own start-up time in the readiness measurement


def seed_style_commands(host: Host, pid: int) -> list[str]:
    """The same facts, one ssh process each, the way the seed's operator gathered them."""
    assert host.service is not None
    _, backup = host.backup(None)
    commands = [shlex.join(file_hash_argv(backup.backup_path(name), live)) for name, live in backup.files.items()]
    commands.append(shlex.join(listing_argv(listing_paths(backup))))
    commands.append(shlex.join(service_state_argv(host.service)))
    commands.append(f"curl -s -m4 -o /dev/null -w '%{{http_code}}' {shlex.quote(host.service.health_url)}")
    commands.append(shlex.join(cmdline_argv(pid)))
    commands.append(f"cat /proc/{pid}/stat /proc/uptime; date +%s.%N")
    return commands


def run_seed_style(lab_host: LabHost, known_hosts: Path, port: int, commands: list[str]) -> float:
    started = time.monotonic()
    for command in commands:
        argv = lab_host.ssh_argv(command, address="127.0.0.1", port=port, known_hosts=known_hosts)
        subprocess.run(argv, check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    return time.monotonic() - started


async def measure(lab: NetnsLab, delay_s: float, repeats: int, db: Path) -> dict[str, float]:
    lab_host = lab["ct129"]
    async with DelayProxy(lab_host.address, lab_host.port, delay_s=delay_s) as proxy:
        known_hosts = db.parent / f"known_hosts_{proxy.port}"
        known_hosts.write_text(lab_host.known_hosts_line("127.0.0.1", proxy.port) + "\n")
        document = lab.inventory()
        document["hosts"]["ct129"].update({"address": "127.0.0.1", "port": proxy.port})
        document["ssh"]["known_hosts"] = str(known_hosts)
        host = parse_inventory(yaml.safe_dump(document), "bench.yml").host("ct129")
        audit = AuditStore.open(db)
        ours, connections, round_trips = [], [], []
        for _ in range(repeats):
            before = proxy.accepted
            result = await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
            assert result.verdict == "pass", [f.to_json() for f in result.checks if f.status != "pass"]
            ours.append(result.duration_s)
            connections.append(proxy.accepted - before)
            round_trips.append(result.stats["exec_round_trips"])
        audit.close()
        commands = seed_style_commands(host, lab_host.service_pid())
        seed = []
        seed_connections = 0
        for _ in range(repeats):
            before = proxy.accepted
            seed.append(await asyncio.to_thread(run_seed_style, lab_host, known_hosts, proxy.port, commands))
            seed_connections = proxy.accepted - before
    return {"delay_ms": delay_s * 1000, "ours_s": statistics.median(ours), "ours_conn": max(connections),
            "ours_rt": max(round_trips), "seed_s": statistics.median(seed), "seed_conn": seed_connections,
            "seed_rt": len(commands)}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delays-ms", default="0,25,50", help="one-way delays to add, comma separated")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    reason = require_root_netns()
    if reason:
        print(f"bench: skipped: {reason}", file=sys.stderr)
        return 2
    rows = []
    with NetnsLab() as lab:
        lab.start(["ct129"])
        db = lab.workdir / "bench.db"
        for delay_ms in (float(d) for d in args.delays_ms.split(",")):
            rows.append(await measure(lab, delay_ms / 1000, args.repeats, db))
        restart_bench.start_host(lab, READY_DELAY_S)  # restart: how soon is readiness reported?
        readiness = [await restart_bench.measure_readiness(lab, float(ms) / 1000, args.repeats, db)
                     for ms in args.delays_ms.split(",")]
    print("verify of one host (3 files, watch dir, supervisord service), median of "
          f"{args.repeats} runs; RTT = 2 x one-way delay")
    print(f"{'one-way delay':>13} | {'proofbot: conns':>15} {'exec RTs':>8} {'wall':>8} | "
          f"{'seed way: ssh procs':>19} {'wall':>8} | speed-up")
    for row in rows:
        print(f"{row['delay_ms']:>10.0f} ms | {row['ours_conn']:>15.0f} {row['ours_rt']:>8.0f} "
              f"{row['ours_s']:>7.3f}s | {row['seed_conn']:>19.0f} {row['seed_s']:>7.3f}s | "
              f"{row['seed_s'] / row['ours_s']:>6.1f}x")
    print()
    restart_bench.print_rows(readiness, READY_DELAY_S, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
