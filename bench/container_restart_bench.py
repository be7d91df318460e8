"""Benchmark: how soon after a restarted container may be proven does proofbot give its verdict?

Needs root (a namespace host and a private dockerd, see tests/lab/docker.py). The container runs the lab's stand-in
server behind ``--init``; it answers /health 503 for ``--startup-delay`` seconds after each start and logs the
moment it turns ready ("fake-llm pid N ready at EPOCH"; the host's clock is this machine's). A restart can be
proven no sooner than ``max(ready, StartedAt + min_uptime_s)``: the gap is from that moment to proofbot's first
all-green report, and to its verdict (``restart`` returning).

Run: .venv/bin/python -m bench.container_restart_bench [--delays-ms 0,50] [--repeats 3] [--min-uptime 2]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import yaml

from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.restart import RestartProgress, plan_restart, restart
from commands.store.db import AuditStore
from tests.lab.common import FAKE_LLM, LabHost
from tests.lab.docker import DOCKER, Engine, require_docker, start_engine, stop_engine
from tests.lab.image import ensure_image
from tests.lab.netns import NetnsLab
from tests.lab.proxy import DelayProxy

HOST, NAME, PORT, IMAGE = "ct150", "bench", 30041, "proofbot-lab:bookworm"
SCRIPT = "/srv/app/fake_llm.py"
Rows = list[tuple[float, list[dict[str, float]]]]  # per one-way delay, each restart's gaps


def inventory(lab: NetnsLab, engine: Engine, host: LabHost, port: int, known_hosts: Path,
              min_uptime_s: float) -> str:
    document = lab.inventory()
    document["ssh"]["known_hosts"] = str(known_hosts)
    document["hosts"] = {HOST: {"address": "127.0.0.1", "port": port, "service": {
        "manager": "docker", "container": NAME, "engine": {"cli": DOCKER, "host": engine.socket},
        "health_url": f"http://127.0.0.1:{PORT}/health", "min_uptime_s": min_uptime_s, "ready_timeout_s": 60}}}
    return yaml.safe_dump(document)


def provable_at(engine: Engine, min_uptime_s: float) -> tuple[float, float]:
    """(when the new run logged it was ready, its StartedAt) on the host's clock."""
    shown = engine.docker("logs", NAME)
    logs = shown.stdout + shown.stderr
    ready = float(re.findall(r"fake-llm pid \d+ ready at ([0-9.]+)", logs)[-1])
    started = engine.docker("inspect", "--format", "{{.State.StartedAt}}", NAME).stdout.strip()
    return ready, datetime.fromisoformat(started).timestamp() + min_uptime_s


async def one_restart(lab: NetnsLab, engine: Engine, delay_s: float, min_uptime_s: float,
                      db: Path) -> dict[str, float]:
    host = lab.hosts[HOST]
    async with DelayProxy(host.address, host.port, delay_s=delay_s) as proxy:
        known_hosts = db.parent / f"known_hosts_{proxy.port}"
        known_hosts.write_text(host.known_hosts_line("127.0.0.1", proxy.port) + "\n")
        plan = await plan_restart(parse_inventory(inventory(lab, engine, host, proxy.port, known_hosts,
                                                            min_uptime_s), "bench.yml").host(HOST))
        reported: list[float] = []

        async def note(progress: RestartProgress) -> None:
            if progress.ready_after_s is not None and not reported:
                reported.append(time.time())

        audit = AuditStore.open(db)
        try:
            result = await restart(plan, origin=Origin.local_user(), audit=audit, on_progress=note)
        finally:
            audit.close()
        verdict_at = time.time()
    if result.verdict != "pass" or not reported:
        raise RuntimeError(f"restart did not pass: {[f.to_json() for f in result.checks if f.status != 'pass']}")
    ready, uptime_held = provable_at(engine, min_uptime_s)
    provable = max(ready, uptime_held)
    return {"green_ms": (reported[0] - provable) * 1000, "verdict_ms": (verdict_at - provable) * 1000,
            "ready_after_s": float(result.extra["ready_after_s"])}


def print_rows(rows: Rows, startup_delay_s: float, min_uptime_s: float) -> None:
    print(f"restart of a Docker container (docker restart, --init) whose server is ready {startup_delay_s:g} s after "
          f"it starts, min_uptime_s {min_uptime_s:g}; polls every 0.25 s over one SSH connection; gap from "
          "max(server ready, StartedAt + min_uptime_s) on the host's clock")
    for delay_s, runs in rows:
        green = [run["green_ms"] for run in runs]
        verdict = [run["verdict_ms"] for run in runs]
        print(f"  one-way delay {delay_s * 1000:>3.0f} ms: all green {statistics.median(green):.0f} ms after "
              f"(max {max(green):.0f}); verdict {statistics.median(verdict):.0f} ms after (max {max(verdict):.0f}); "
              f"ready_after_s {statistics.median(run['ready_after_s'] for run in runs):.2f}; {len(runs)} restarts")


async def measure(lab: NetnsLab, engine: Engine, args: argparse.Namespace) -> Rows:
    db = lab.workdir / "bench.db"
    rows = []
    for ms in args.delays_ms.split(","):
        delay_s = float(ms) / 1000
        rows.append((delay_s, [await one_restart(lab, engine, delay_s, args.min_uptime, db)
                               for _ in range(args.repeats)]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delays-ms", default="0,50", help="one-way delays to add, comma separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--startup-delay", type=float, default=1.0, help="seconds the server takes to be ready")
    parser.add_argument("--min-uptime", type=float, default=2.0, help="the service's min_uptime_s")
    args = parser.parse_args()
    reason = require_docker("container restart bench")
    if reason:
        print(f"bench: skipped: {reason}", file=sys.stderr)
        return 2
    rootfs, _ = ensure_image()
    with NetnsLab() as lab:
        lab.start([HOST])
        engine = start_engine(netns=lab.hosts[HOST].netns)
        try:
            engine.import_rootfs(rootfs, IMAGE)
            engine.docker("run", "-d", "--name", NAME, "--init", "--network", "host", "-v",
                          f"{FAKE_LLM}:{SCRIPT}:ro", IMAGE, "python3", SCRIPT, "--host", "127.0.0.1", "--port",
                          str(PORT), "--startup-delay", str(args.startup_delay))
            rows = asyncio.run(measure(lab, engine, args))
        finally:
            engine.docker("rm", "-f", NAME, check=False)
            stop_engine(engine)
    print_rows(rows, args.startup_delay, args.min_uptime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
