"""Benchmark: the watch's audit growth over a simulated week, against a naive watch that logs every host's
verify every run.

No root, no network beyond loopback. Run: .venv/bin/python -m bench.watch_bench [--hosts 100] [--days 7]
A loopback lab host is verified for real once passing and once with a patched file; those two results,
under each host's name, are what each simulated run of 100 hosts every 5 minutes returns. Three real changes
happen in the week (a host fails, it recovers, another fails). The watch runs on a simulated clock through its
real state machine and its real audit writer into a SQLite file. The naive baseline writes every host's whole
verify trail (requested, each check, finished; and the fleet's) every run, through the same writers, for
``--naive-runs`` runs; its week is that times the week's runs (every run writes the same, so it is linear).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import resource
import sqlite3
import tempfile
import time
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from bot.demo.host import ORIGINAL_FILES, PATCHED_SPEC_INFO, demo_host
from commands.inventory import parse_inventory
from commands.inventory.watch import WatchEntry
from commands.operation import OperationResult, Origin, new_operation_id
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.verify.fleet import FleetResult
from commands.verify.operation import verify
from commands.verify.plan import VerifyPlan
from commands.vocabulary import Operation
from commands.watch.audit import WatchAudit, scratch_store
from commands.watch.schedule import TargetRun, Watch
from commands.watch.state import Announcement
from tests.watch_rig import SimulatedClock

START = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)
ORIGIN = Origin("proofbot:watch", "slack")


async def real_results() -> tuple[OperationResult, OperationResult]:
    """A real passing and a real failing verify of a loopback lab host (a file patched, then put back)."""
    async with demo_host("ct100", patched=False, extra_file=False,
                         flags=["--speculative-algorithm", "NEXTN"]) as host:
        document = host.inventory()
        inventory = parse_inventory(yaml.safe_dump(document), "bench.yml")
        plan = VerifyPlan.for_host(inventory.hosts["ct100"], None)
        async with scratch_store() as scratch:
            passing = await verify(plan, origin=ORIGIN, audit=scratch)
            (host.live_dir / "spec_info.py").write_text(PATCHED_SPEC_INFO)
            failing = await verify(plan, origin=ORIGIN, audit=scratch)
            (host.live_dir / "spec_info.py").write_text(ORIGINAL_FILES["spec_info.py"])
    return passing, failing


def db_bytes(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def events(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


def fleet_of(hosts: list[str], failing_now: set[str], passing: OperationResult,
             failing: OperationResult) -> FleetResult:
    results = [dataclasses.replace(failing if name in failing_now else passing, host=name,
                                   operation_id=new_operation_id()) for name in hosts]
    return FleetResult(new_operation_id(), Operation.VERIFY, "fleet", START.isoformat(), 1.0, results)


async def compact_week(path: Path, hosts: list[str], days: int, passing: OperationResult,
                       failing: OperationResult) -> tuple[int, int, int, float]:
    """The watch over ``days`` of simulated 5-minute runs: (runs, messages, changes logged, CPU-seconds)."""
    # three real changes: hosts[5] fails on day 2 and recovers two hours later; hosts[42] fails on day 5
    incidents = [(hosts[5], START + timedelta(days=1, hours=9), START + timedelta(days=1, hours=11)),
                 (hosts[42], START + timedelta(days=4, hours=15), START + timedelta(days=days + 1))]
    document = {"hosts": {name: {"address": "127.0.0.1"} for name in hosts}, "groups": {"fleet": hosts},
                "watch": [{"target": "fleet", "every": "5m", "channel": "C0WATCH"}]}
    inventory = parse_inventory(yaml.safe_dump(document), "bench.yml")
    clock = SimulatedClock(START)
    said: list[Announcement] = []

    async def verify_target(_entry: WatchEntry) -> FleetResult:
        now = clock.now()
        broken = {host for host, start, end in incidents if start <= now < end}
        return fleet_of(hosts, broken, passing, failing)

    async def post(_entry: WatchEntry, announcement: Announcement, _fleet: FleetResult) -> None:
        said.append(announcement)

    store = AuditStore.open(path)
    runs = 0
    recorder = WatchAudit(store, inventory, ORIGIN)

    async def counted(run: TargetRun) -> None:
        nonlocal runs
        runs += 1
        await recorder.record(run)

    cpu = time.process_time()
    try:
        watch = Watch(inventory.watch, verify_target, post, clock=clock, on_run=counted)
        await watch.run_forever(until=START + timedelta(days=days))
    finally:
        store.close()
    return runs, len(said), sum(len(a.changes) for a in said), time.process_time() - cpu


async def naive_runs(path: Path, hosts: list[str], runs: int, passing: OperationResult) -> None:
    """Every host's whole verify trail, every run, as a watch over ``verify_fleet`` with the real log writes."""
    store = AuditStore.open(path)
    try:
        for _ in range(runs):
            fleet = fleet_of(hosts, set(), passing, passing)
            fleet_log = audit_log(store, Operation.VERIFY, fleet.operation_id, None, ORIGIN.actor)
            await fleet_log.requested(ORIGIN, fleet={"target": "fleet", "hosts": hosts})
            for result in fleet.results:
                log = audit_log(store, Operation.VERIFY, result.operation_id, result.host, ORIGIN.actor)
                await log.requested(ORIGIN, backup=None, checks=[f.name for f in result.checks],
                                    fleet_operation_id=fleet.operation_id)
                for finding in result.checks:
                    await log.check(finding)
                await log.finished(Finished.of(result))
            await fleet_log.finished(Finished(fleet.verdict, counts={"pass": len(hosts)},
                                              hosts={r.host: r.operation_id for r in fleet.results}))
    finally:
        store.close()


async def live_run(names: int) -> tuple[float, float]:
    """One real watch run (a fleet verify, judged, nothing to say) over ``names`` inventory names that all reach
    one loopback lab host, as the tier-1 tests do: (wall seconds, CPU-seconds of this process, which also
    serves the SSH side)."""
    from commands.watch.fleet import fleet_verifier  # only this mode needs the fleet verify

    async with demo_host("ct100", patched=False, extra_file=False,
                         flags=["--speculative-algorithm", "NEXTN"]) as host:
        document = host.inventory()
        entry = document["hosts"]["ct100"]
        document["hosts"] = {f"ct{n}": entry for n in range(1000, 1000 + names)}
        document["groups"] = {"fleet": list(document["hosts"])}
        document["watch"] = [{"target": "fleet", "every": "5m", "channel": "C0WATCH"}]
        inventory = parse_inventory(yaml.safe_dump(document), "bench.yml")
        said: list[Announcement] = []

        async def post(_entry: WatchEntry, announcement: Announcement, _fleet: FleetResult) -> None:
            said.append(announcement)

        watch = Watch(inventory.watch, fleet_verifier(inventory, None, ORIGIN), post, clock=SimulatedClock(START))
        wall, cpu = time.perf_counter(), time.process_time()
        (run,) = await watch.run_once()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert len(run.results) == names and not said, (run.verdict, said)
    return wall, cpu


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--naive-runs", type=int, default=12, help="naive runs written (then scaled to the week)")
    parser.add_argument("--live", type=int, default=0, metavar="N",
                        help="also time one real run over N inventory names on one loopback lab host")
    args = parser.parse_args()
    if args.live:
        wall, cpu = await live_run(args.live)
        print(f"one real watch run over {args.live} loopback inventory hosts: {wall:.1f} s, {cpu:.1f} CPU-s "
              f"(SSH server side in the same process), {wall / args.live * 1000:.0f} ms a host")
    hosts = [f"ct{n}" for n in range(100, 100 + args.hosts)]
    passing, failing = await real_results()
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.db"
        AuditStore.open(empty).close()
        base = db_bytes(empty)
        compact = Path(tmp) / "compact.db"
        runs, messages, changes, cpu = await compact_week(compact, hosts, args.days, passing, failing)
        naive = Path(tmp) / "naive.db"
        await naive_runs(naive, hosts, args.naive_runs, passing)
        scale = runs / args.naive_runs
        naive_events, naive_bytes = events(naive) * scale, (db_bytes(naive) - base) * scale
        compact_events, compact_bytes = events(compact), db_bytes(compact) - base
    print(f"watch of {args.hosts} hosts every 5 min for {args.days} simulated days: {runs} runs, "
          f"{messages} messages, {changes} host changes")
    print(f"  compact (this watch): {compact_events:,} events, {compact_bytes / 1e6:.2f} MB "
          f"({compact_bytes / runs / 1e3:.2f} kB a run); {cpu:.1f} CPU-s for the week's judging and writing")
    print(f"  naive (every host every run, from {args.naive_runs} runs): {naive_events:,.0f} events, "
          f"{naive_bytes / 1e6:.0f} MB")
    print(f"  ratio: {naive_events / compact_events:.0f}x fewer events, "
          f"{naive_bytes / compact_bytes:.0f}x less growth; "
          f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    asyncio.run(main())
