"""Benchmark: a verify over a warm pooled connection (as ``serve`` runs it) against a cold one, and both against
the floor, at +RTT; wall time and this process's CPU-seconds per verify.

No root: the lab host (bot/demo, an in-process asyncssh server with supervisord) and its delay proxy
(tests/lab/proxy.py, half the RTT each way) run in a child process, so the CPU measured here is the
bot's side alone. Run: .venv/bin/python -m bench.warm_bench [--rtt-ms 50] [--repeats 10]

* cold: ``verify()`` with no pool, as the CLI and a first ``/verify`` run it (handshake, known_hosts, login);
* warm: ``verify()`` inside ``warm_connections()``, the core path ``serve`` runs for ``/verify`` and the watch;
* floor cold: a bare ``asyncssh.connect`` and one ``sh -s`` exec of verify's own batch; floor warm: that exec
  alone on an open connection (one exec round trip + the host-side script time). Health and the probe, which
  proofbot sends over SSH channels while the batch runs, are work above the floor.
Imports are done before anything is timed: a ``serve`` has them already.

Then whole processes, cold, as a user runs them (``--fleet N``, default 20): ``proofbot verify all`` over N
inventory hosts (N names for the same lab host, each its own connection and batch) against the floor of
bench/fleet_bench.py (bench/floor_child.py: a fresh Python that imports only asyncssh, one connection per host,
the same batch with health and the probe as ``curl`` in it), alternating, CPU-seconds (user + system) of each
process and its wall time; both in fleet_bench's venv of exactly requirements.lock (made on first use).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import yaml

from bench.fleet_bench import Run, floor_spec, run_measured, runtime_python
from commands.inventory import Host, parse_inventory
from commands.operation import Origin
from commands.ssh import open_connections, warm_connections
from commands.ssh.batch import batch_script  # the exact script proofbot's run_batch sends
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from commands.verify.operation import host_batch


async def serve_host(rtt_ms: float) -> None:
    """Child: the lab host behind a delay proxy; prints its inventory, runs until stdin closes."""
    from bot.demo.host import demo_host
    from tests.lab.proxy import DelayProxy

    async with demo_host("ct130", patched=False, extra_file=False, flags=["--speculative-algorithm", "NEXTN"]) as lab, \
            DelayProxy("127.0.0.1", lab.ssh_port, delay_s=rtt_ms / 2000) as proxy:
        document = lab.inventory()
        document["hosts"][lab.name]["port"] = proxy.port
        known = lab.root / "known_hosts_proxy"
        known.write_text(f"[127.0.0.1]:{proxy.port} " + lab.known_hosts.read_text().split(" ", 1)[1])
        document["ssh"]["known_hosts"] = str(known)
        print(json.dumps(document), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def timed(label: str, repeats: int, once: Callable[[], Awaitable[object]]) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        cpu, started = time.process_time(), time.perf_counter()
        await once()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    row = {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}
    print(f"  {label}: wall {row['wall_s'] * 1000:.0f} ms, CPU {row['cpu_s'] * 1000:.1f} ms (median of {repeats})",
          flush=True)
    return row


async def measure(host: Host, repeats: int, db: Path) -> dict[str, dict[str, float]]:
    audit = AuditStore.open(db)
    plan = VerifyPlan.for_host(host, None)

    async def one_verify() -> None:
        result = await verify(plan, origin=Origin.local_user(), audit=audit)
        assert result.verdict == "pass", [f.to_json() for f in result.checks if f.status != "pass"]

    script = batch_script(secrets.token_hex(8), host_batch(plan))  # health and the probe are proofbot's extra
    options: dict[str, Any] = {"username": host.ssh.user, "known_hosts": str(host.ssh.known_hosts_path()),
                               "client_keys": [str(host.ssh.client_key_paths()[0])], "config": None,
                               "agent_path": None, "password": None, "kbdint_auth": False}

    async def floor_exec(conn: asyncssh.SSHClientConnection) -> None:
        result = await conn.run("sh -s", input=script.encode(), encoding=None, check=False)
        assert result.exit_status == 0 and result.stdout

    async def floor_cold() -> None:
        async with asyncssh.connect(host.address, host.port, **options) as conn:
            await floor_exec(conn)

    rows: dict[str, dict[str, float]] = {}
    try:
        await one_verify()  # imports (httpx over a channel), caches: what a running serve has done already
        await floor_cold()
        rows["cold"] = await timed("proofbot cold verify", repeats, one_verify)
        rows["floor_cold"] = await timed("floor cold (connect + exec)", repeats, floor_cold)
        async with warm_connections():
            await one_verify()  # the login the pool keeps
            rows["warm"] = await timed("proofbot warm verify", repeats, one_verify)
            assert open_connections() == 1
        async with asyncssh.connect(host.address, host.port, **options) as conn:
            await floor_exec(conn)
            rows["floor_warm"] = await timed("floor warm (exec only)", repeats, lambda: floor_exec(conn))
    finally:
        audit.close()
    return rows


async def whole_processes(document: dict[str, Any], size: int, repeats: int, work: Path,
                          before: Path | None = None) -> Rounds:
    """``proofbot verify all`` over ``size`` inventory names of the lab host, and the floor over as many
    connections, each a fresh process, alternating (one warm-up each, not counted); with ``before`` (another
    clone, e.g. main) its proofbot too, in the same rounds."""
    fleet = {**document, "hosts": {f"ct{200 + index}": document["hosts"]["ct130"] for index in range(size)}}
    inventory = work / f"fleet{size}.yml"
    inventory.write_text(yaml.safe_dump(fleet))
    hosts = [parse_inventory(inventory.read_text(), str(inventory)).host(name) for name in fleet["hosts"]]
    spec = floor_spec(hosts, work / f"floor{size}.json")
    python = runtime_python()  # a venv of exactly requirements.lock, as users run them (fleet_bench's)
    argvs = {"floor": [python, "bench/floor_child.py", str(spec)],
             "proofbot": [python, "-m", "bot.cli", "verify", "all", "--inventory", str(inventory),
                          "--db", str(work / "fleet.db"), "--json"]}
    if before is not None:  # the other clone's bot.cli first on sys.path (the bench's cwd is this clone)
        run_other = (f"import runpy, sys; sys.path.insert(0, {str(before)!r}); "
                     "runpy.run_module('bot.cli', run_name='__main__')")
        argvs["before"] = [python, "-c", run_other, *argvs["proofbot"][3:-3], "--db", str(work / "before.db"),
                           "--json"]
    # As installed (pip compiles every module): bytecode is written and used even where the environment
    # says not to (PYTHONDONTWRITEBYTECODE), outside the clone; the warm-up run writes it.
    env = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(work / "pycache")}
    rounds = await asyncio.to_thread(run_rounds, argvs, repeats, env)
    for label in argvs:
        print(f"  {label} ({size} hosts, whole process): " + ", ".join(
            f"{run.wall_s:.3f} s (CPU {run.cpu_s:.2f} s)" for run in rounds.runs[label]), flush=True)
    return rounds


@dataclass
class Rounds:
    """The whole-process rounds: each process's runs over the rounds that completed, and each failed round's why."""

    runs: dict[str, list[Run]]
    failed: list[str] = field(default_factory=list)  # "round 3: proofbot exit 3 (its last stderr line)"
    asked: int = 0

    @property
    def completed(self) -> int:
        return min((len(runs) for runs in self.runs.values()), default=0)


def run_rounds(argvs: dict[str, list[str]], repeats: int, env: dict[str, str],
               run: Callable[[list[str], dict[str, str]], Run] = run_measured) -> Rounds:
    """One warm-up round (not counted), then ``repeats`` rounds, each process once per round, alternating. A round
    in which a process exits non-zero or passes its deadline (a connect timeout under load) is recorded and left
    out, every process's run of it with it (the comparison stays paired); the others still count."""
    rounds = Rounds({label: [] for label in argvs}, asked=repeats)
    for index in range(repeats + 1):
        done: dict[str, Run] = {}
        for label, argv in argvs.items():
            try:
                outcome = run(argv, env)
            except TimeoutError as exc:
                why = str(exc)
            else:
                if outcome.code == 0:
                    done[label] = outcome
                    continue
                last = (outcome.err.strip().splitlines() or ["no stderr"])[-1]
                why = f"exit {outcome.code} ({last[:200]})"
            said = f"{'warm-up round' if not index else f'round {index}'}: {label} {why}"
            rounds.failed.append(said)
            print(f"  FAILED {said}; that round is left out", flush=True)
            break  # the round is lost: its other processes need not run
        else:
            if index:
                for label, outcome in done.items():
                    rounds.runs[label].append(outcome)
    return rounds


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rtt-ms", type=float, default=50)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--fleet", type=int, default=20, help="hosts of the whole-process part (0: skip it)")
    parser.add_argument("--fleet-repeats", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another clone (e.g. of main) whose verify runs alongside")
    parser.add_argument("--serve-host", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_host:
        await serve_host(args.rtt_ms)
        return 0
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.warm_bench", "--serve-host", "--rtt-ms", str(args.rtt_ms),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert child.stdout is not None and child.stdin is not None
    try:
        document = json.loads(await asyncio.wait_for(child.stdout.readline(), 120))
        host = parse_inventory(yaml.safe_dump(document), "bench.yml").host("ct130")
        work = Path(document["hosts"]["ct130"]["ssh"]["known_hosts"] if "ssh" in document["hosts"]["ct130"]
                    else document["ssh"]["known_hosts"]).parent
        print(f"warm vs cold verify at +{args.rtt_ms:g} ms RTT (userspace proxy), one loopback lab host", flush=True)
        rows = await measure(host, args.repeats, work / "warm-bench.db") if args.repeats else {}
        fleet = await whole_processes(document, args.fleet, args.fleet_repeats, work, args.before) if args.fleet \
            else None
    finally:
        child.stdin.close()
        await asyncio.wait_for(child.wait(), 60)
    code = report_fleet(args.fleet, fleet) if fleet is not None else 0
    if rows:
        report(rows)
    return code


def report_fleet(size: int, rounds: Rounds) -> int:
    """The medians over the rounds that completed, saying how many of how many and why the others failed;
    exit 1 when none completed (nothing to report)."""
    fleet = rounds.runs
    for why in rounds.failed:
        print(f"failed: {why}")
    if not rounds.completed:
        print(f"\nno whole-process round of {rounds.asked} completed: no figure", flush=True)
        return 1
    floor = fleet["floor"]
    floor_cpu, floor_wall = (statistics.median(r.cpu_s for r in floor), statistics.median(r.wall_s for r in floor))
    print(f"\n| {size} hosts, whole process, median of {rounds.completed} of {rounds.asked} rounds "
          f"({rounds.asked - rounds.completed} failed) | wall | x floor | CPU | x floor's CPU |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| floor | {floor_wall:.3f} s | 1.00x | {floor_cpu:.2f} s | 1.00x |")
    for label in [name for name in fleet if name != "floor"]:
        cpu = statistics.median(r.cpu_s for r in fleet[label])
        wall = statistics.median(r.wall_s for r in fleet[label])
        print(f"| `proofbot verify all` ({label}) | {wall:.3f} s | {wall / floor_wall:.2f}x | {cpu:.2f} s | "
              f"{cpu / floor_cpu:.2f}x |")
    return 0


def report(rows: dict[str, dict[str, float]]) -> None:
    cold, warm, floor_cold, floor_warm = rows["cold"], rows["warm"], rows["floor_cold"], rows["floor_warm"]
    print("\n| | wall | over its floor | CPU per verify | over its floor's CPU |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| warm verify (serve) | {warm['wall_s'] * 1000:.0f} ms | {warm['wall_s'] / floor_warm['wall_s']:.2f}x "
          f"(floor: one exec, {floor_warm['wall_s'] * 1000:.0f} ms) | {warm['cpu_s'] * 1000:.1f} ms | "
          f"{warm['cpu_s'] / floor_warm['cpu_s']:.2f}x ({floor_warm['cpu_s'] * 1000:.1f} ms) |")
    print(f"| cold verify | {cold['wall_s'] * 1000:.0f} ms | {cold['wall_s'] / floor_cold['wall_s']:.2f}x "
          f"(floor: connect + exec, {floor_cold['wall_s'] * 1000:.0f} ms) | {cold['cpu_s'] * 1000:.1f} ms | "
          f"{cold['cpu_s'] / floor_cold['cpu_s']:.2f}x ({floor_cold['cpu_s'] * 1000:.1f} ms) |")
    print(f"\nwarm over cold: wall {warm['wall_s'] / cold['wall_s']:.2f}x, CPU {warm['cpu_s'] / cold['cpu_s']:.2f}x")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
