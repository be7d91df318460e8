"""Benchmark: chain appends per second, SQLite vs PostgreSQL, side by side in one run.

No root needed with ``--pg URL``; without it (as root, or as a user who may run PostgreSQL) the bench starts a
private PostgreSQL 15 with its default durability (fsync on) in a temp dir (tests/lab/postgres.py).
Run: .venv/bin/python -m bench.chain_bench [--events 2000] [--processes 1,4] [--pg URL]
Each append is one transaction through the store, as proofbot writes every event (read the head, hash, insert;
SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock); P processes append EVENTS/P each at once, then the
whole chain is checked (`audit verify`'s walk) and must be intact with every event in it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

from commands.store.chain import verify_chain
from commands.store.db import AuditStore
from commands.store.events import append_event

CHILD_TIMEOUT_S = 600


async def _append(target: str, count: int, tag: str) -> None:
    store = await asyncio.to_thread(AuditStore.open, target)
    try:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await asyncio.to_thread(sys.stdin.readline)  # start together
        for n in range(count):
            await store.write(lambda db, n=n: append_event(db, "check", actor=tag, details={"n": n, "by": tag}))
    finally:
        store.close()


async def _run(target: str, events: int, processes: int) -> tuple[float, int, bool]:
    store = AuditStore.open(target)  # migrated before the clock starts
    try:
        before = (await verify_chain(store)).events  # a given --pg database may hold a run's events already
    finally:
        store.close()
    per = events // processes
    children = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.chain_bench", "--child", target, str(per), f"p{i}",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE) for i in range(processes)]
    async with asyncio.timeout(CHILD_TIMEOUT_S):
        for child in children:
            assert child.stdout is not None
            await child.stdout.readline()
        started = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            await child.stdin.drain()
        codes = [await child.wait() for child in children]
        elapsed = time.perf_counter() - started
    if codes != [0] * processes:
        raise SystemExit(f"an appender failed: exit codes {codes}")
    store = AuditStore.open(target)
    try:
        report = await verify_chain(store)
    finally:
        store.close()
    return elapsed, report.events - before, report.intact and report.events == before + per * processes


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--processes", default="1,4")
    parser.add_argument("--pg", metavar="URL", help="a PostgreSQL database to append to (default: a private cluster)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        target, count, tag = args.child
        await _append(target, int(count), tag)
        return
    from tests.lab.postgres import bench_cluster  # the appenders (--child) need none of the lab

    with contextlib.ExitStack() as stack:
        cluster = await asyncio.to_thread(stack.enter_context, bench_cluster(args.pg))
        with tempfile.TemporaryDirectory(prefix="proofbot-chain-bench-") as scratch:
            print(f"{args.events} chain appends, each its own transaction; PostgreSQL 15 "
                  f"({'fsync on, private cluster' if cluster else 'given URL'}) vs SQLite (WAL, {scratch})")
            print(f"{'backend':<12}{'processes':>10}{'appends':>9}{'seconds':>9}{'appends/s':>11}  chain")
            for processes in [int(p) for p in args.processes.split(",")]:
                for backend in ("sqlite", "postgresql"):
                    if backend == "sqlite":
                        target = str(Path(scratch) / f"p{processes}.db")
                    else:
                        target = cluster.database(f"bench_p{processes}") if cluster else args.pg
                    elapsed, events, intact = await _run(target, args.events, processes)
                    print(f"{backend:<12}{processes:>10}{events:>9}{elapsed:>9.2f}{events / elapsed:>11.0f}  "
                          f"{'intact' if intact else 'BROKEN'}")


if __name__ == "__main__":
    asyncio.run(main())
