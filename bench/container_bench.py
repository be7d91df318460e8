"""Benchmark: `verify` of a Podman container service against the same host running the same server under
supervisord, side by side in one run, over a delayed link (+50 ms RTT by default).

One namespace host: supervisord runs the lab's server on :30000; Podman (tests/lab/podman.py) runs the very same
script with the same flags, `--network host --init`, on :30100. Two inventory entries share the host, its
backups (3 files, a watch dir, bind-mounted into the container at the same paths: a container's files are read
inside it) and the delay proxy; only `service:` differs. The runs alternate.
Needs root. Run: .venv/bin/python -m bench.container_bench [--rtt-ms 50] [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from typing import Any

import yaml

from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.common import SITE
from tests.lab.netns import SERVICE_SCRIPT, NetnsHost, NetnsLab
from tests.lab.podman import IMAGE, require_podman, start_podman, stop_podman
from tests.lab.proxy import DelayProxy

POD_PORT = 30100


def documents(lab: NetnsLab, proxy_port: int, known_hosts: str, podman_cli: str) -> dict[str, Any]:
    document = lab.inventory()
    plain = document["hosts"]["ct129"]
    plain.update({"address": "127.0.0.1", "port": proxy_port})
    pod = yaml.safe_load(yaml.safe_dump(plain))  # the same host, backups and checks; another manager
    service = pod["service"]
    del service["unit"]
    service.update({"manager": "podman", "container": "sglang", "engine": podman_cli, "min_uptime_s": 1,
                    "health_url": service["health_url"].replace(":30000", f":{POD_PORT}")})
    service["probe"]["url"] = service["probe"]["url"].replace(":30000", f":{POD_PORT}")
    document["hosts"]["ct129-pod"] = pod
    document["ssh"]["known_hosts"] = known_hosts
    return document


async def measure(lab: NetnsLab, podman_cli: str, rtt_s: float, repeats: int) -> dict[str, dict[str, float]]:
    host = lab["ct129"]
    rows: dict[str, list[dict[str, float]]] = {"ct129": [], "ct129-pod": []}
    async with DelayProxy(host.address, host.port, delay_s=rtt_s / 2) as proxy:
        known_hosts = lab.workdir / f"known_hosts_{proxy.port}"
        known_hosts.write_text(host.known_hosts_line("127.0.0.1", proxy.port) + "\n")
        inventory = parse_inventory(yaml.safe_dump(documents(lab, proxy.port, str(known_hosts), podman_cli)),
                                    "bench.yml")
        audit = AuditStore.open(lab.workdir / "bench.db")
        try:
            for index in range(repeats + 1):  # the first pair warms both paths up and is not counted
                for name in rows:
                    before = proxy.accepted
                    result = await verify(VerifyPlan.for_host(inventory.host(name), "pre-ddtree"),
                                          origin=Origin.local_user(), audit=audit)
                    assert result.verdict == "pass", [f.to_json() for f in result.checks if f.status != "pass"]
                    main = next(f for f in result.checks if f.name == "main-pid")
                    if index:
                        rows[name].append({"wall": result.duration_s, "conns": proxy.accepted - before,
                                           "rts": result.stats["exec_round_trips"], "checks": len(result.checks),
                                           "state": main.evidence.duration_s if main.evidence else 0.0})
        finally:
            audit.close()
    return {name: {key: statistics.median(row[key] for row in runs) for key in runs[0]}
            for name, runs in rows.items()}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rtt-ms", type=float, default=50.0, help="round-trip time added by the delay proxy")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    reason = require_podman("container bench")
    if reason:
        print(f"bench: skipped: {reason}", file=sys.stderr)
        return 2
    with NetnsLab() as lab:
        lab.start(["ct129"])
        host = lab.hosts["ct129"]
        assert isinstance(host, NetnsHost)
        podman = start_podman(host)
        try:
            argv = host.scenario.service_argv(SERVICE_SCRIPT)
            argv[argv.index("--port") + 1] = str(POD_PORT)
            podman.podman("run", "-d", "--pull=never", "--name", "sglang", "--init", "--network", "host",
                          "-v", f"{SERVICE_SCRIPT}:{SERVICE_SCRIPT}:ro",
                          # the backups' live files, at the same paths: a container's files are read inside it
                          "-v", f"{SITE}:{SITE}:ro", IMAGE, "python3", *argv[1:])
            await asyncio.sleep(2)  # past min_uptime_s
            rows = await measure(lab, podman.cli, args.rtt_ms / 1000, args.repeats)
        finally:
            stop_podman(podman)
    plain, pod = rows["ct129"], rows["ct129-pod"]
    print(f"verify of one host (3 files, a watch dir, health, probe, cmdline, stale-process), +{args.rtt_ms:g} ms "
          f"RTT, median of {args.repeats} alternating runs")
    print(f"{'':>26} | {'supervisord':>11} | {'podman':>11}")
    for label, key, unit in (("checks", "checks", ""), ("SSH connections", "conns", ""),
                             ("exec round trips", "rts", ""), ("main-pid step on the host", "state", "s"),
                             ("wall", "wall", "s")):
        fmt = ".3f" if unit else ".0f"
        print(f"{label:>26} | {plain[key]:>10{fmt}}{unit or ' '} | {pod[key]:>10{fmt}}{unit or ' '}")
    print(f"container / supervisord wall time: {pod['wall'] / plain['wall']:.2f}x "
          f"({(pod['wall'] - plain['wall']) * 1000:+.0f} ms; the main-pid step: "
          f"{(pod['state'] - plain['state']) * 1000:+.0f} ms, `podman inspect` in place of `supervisorctl status`)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
