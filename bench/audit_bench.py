"""Benchmark: the audit trail query and the chain check over a log of 100,000 events.

No root, no network. Run: .venv/bin/python -m bench.audit_bench [--events 100000] [--repeats 15] [--db PATH]
Fills a temporary database with realistic operations (requested, six checks, finished;
every fifth one a restore with an approval) spread over several hosts and 90 days,
inserted in one transaction that computes the hash chain, then times
``recent_operations`` (what ``/audit`` and ``proofbot audit`` run) and ``verify_chain``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from commands.store.chain import verify_chain
from commands.store.db import AuditStore
from commands.store.events import GENESIS_HASH, event_hash
from commands.store.trail import recent_operations

HOSTS = [f"ct{n}" for n in range(125, 133)]
CHECKS = ["file:spec_info.py", "extra-files", "main-pid", "health", "cmdline", "stale-process"]
USERS = ["U0ALICE", "U0BOB", "U0CAROL", "U0DAVE"]
COLUMNS = ("at", "operation_id", "operation", "host", "kind", "actor", "details")


def operations(total_events: int, rng: random.Random) -> Iterator[dict[str, Any]]:
    """Event contents (no hashes yet) in append order, about 8 per operation."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    step = timedelta(days=90) / (total_events / 8)
    emitted, n = 0, 0
    while emitted < total_events:
        n += 1
        at = start + step * n
        host, user = rng.choice(HOSTS), rng.choice(USERS)
        operation = "restore" if n % 5 == 0 else "verify"
        op_id = f"op-{at:%Y%m%dT%H%M%S}-{n:06x}"
        slack = n % 3 != 0
        origin: dict[str, Any] = {
            "actor": f"slack:{user}" if slack else "root@ops1", "via": "slack" if slack else "cli",
            "channel": "C0OPS" if slack else None, "thread_ts": f"{at.timestamp():.6f}" if slack else None}
        actor = origin["actor"]
        events: list[tuple[str, Any, dict[str, Any]]] = [
            ("requested", actor, {"checks": CHECKS, "origin": origin, "backup": "pre-ddtree"})]
        if operation == "restore":
            events.append(("approved", f"slack:{rng.choice(USERS)}", {"plan_hash": f"{n:064x}"}))
        for name in CHECKS:
            status = "pass" if rng.random() < 0.9 else "fail"
            output = f"{n:064x}  /root/ml-env/lib/python3.12/site-packages/sglang/srt/speculative/{name}\n" * 2
            events.append(("check", actor, {"name": name, "status": status, "summary": f"{name}: {status}",
                                            "evidence": {"command": f"sha256sum -- /root/{name}", "exit_status": 0,
                                                         "output": output, "duration_s": 0.012}}))
        events.append(("finished", actor, {"verdict": "pass", "duration_s": 1.3}))
        for i, (kind, who, details) in enumerate(events):
            if emitted == total_events:
                return
            emitted += 1
            stamp = (at + timedelta(milliseconds=150 * i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            yield {"at": stamp, "operation_id": op_id, "operation": operation, "host": host, "kind": kind,
                   "actor": who, "details": details}


def fill(path: Path, total_events: int) -> float:
    """Create the database through AuditStore (migrations), then bulk-append in one transaction."""
    AuditStore.open(path).close()
    started = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    prev = GENESIS_HASH
    rows = []
    for fields in operations(total_events, random.Random(5)):
        fields["prev_hash"] = prev
        prev = event_hash(fields)
        rows.append((*(fields[c] for c in COLUMNS[:-1]), json.dumps(fields["details"], sort_keys=True,
                                                                   ensure_ascii=False), fields["prev_hash"], prev))
    conn.executemany("INSERT INTO events (at, operation_id, operation, host, kind, actor, details, prev_hash, hash) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - started


async def timed(repeats: int, work: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = await work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--db", type=Path, help="keep the filled database here (must not exist), e.g. for Datasette")
    args = parser.parse_args()
    if args.db is not None and args.db.exists():
        parser.error(f"{args.db} exists; the bench fills a new database")
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "proofbot.db"
        fill_s = fill(db, args.events)
        store = AuditStore.open(db)
        try:
            count = await store.read(lambda conn: conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
            ops = await store.read(lambda c: c.execute("SELECT COUNT(*) FROM events WHERE kind = 'requested'")
                                   .fetchone()[0])
            print(f"{count} events, {ops} operations on {len(HOSTS)} hosts, "
                  f"{db.stat().st_size / 1e6:.0f} MB; filled in {fill_s:.2f} s")
            cases: list[tuple[str, str | None, int]] = [
                ("/audit ct129 (N=10)", "ct129", 10), ("/audit ct129 25", "ct129", 25),
                ("/audit (all hosts, N=10)", None, 10), ("proofbot audit --limit 1000", None, 1000)]
            for label, host, limit in cases:
                median, records = await timed(args.repeats, functools.partial(recent_operations, store, host, limit))
                print(f"  {label:<30} {median * 1000:8.2f} ms  (median of {args.repeats}, {len(records)} rows)")
            median, report = await timed(3, lambda: verify_chain(store))
            state = "intact" if report.intact else f"BROKEN: {report.broken}"
            print(f"  {'audit verify (whole chain)':<30} {median * 1000:8.0f} ms  (median of 3, "
                  f"{report.events} events, {state})")
        finally:
            store.close()


if __name__ == "__main__":
    asyncio.run(main())
