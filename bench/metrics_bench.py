"""Benchmark: one ``/metrics`` scrape of ``serve``'s metrics server with 10,000 operations recorded, against
an empty store.

No root, no network beyond loopback. Run: .venv/bin/python -m bench.metrics_bench [--operations 10000]
Each operation is written to a real SQLite audit store through the real event bodies, as a verify writes it
(requested, five checks with their evidence and times, finished; one in ten a restart with its plan decided),
with serve's ``Metrics`` installed, so the counters and histograms hold what 10,000 operations put there.
Then the real metrics server (aiohttp, on 127.0.0.1) is scraped over HTTP ``--scrapes`` times; each scrape
also reads the chain's length from the store. The empty store and a tenth of the operations run the same way:
the cost follows the label sets (bounded: operation x verdict, check family x bucket), not the operations.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bot.metrics import Metrics, start_metrics_server
from commands.findings import Evidence, Finding
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.kinds import Approved, Check, Finished, Requested
from commands.store.log import Subject
from commands.vocabulary import CheckStatus, Operation, Verdict

CHECKS = ("file:spec_info.py", "extra-files", "main-pid", "health", "cmdline")
CHUNK = 500  # operations per transaction while recording


def _record(db: Any, first: int, count: int) -> None:
    origin = Origin.local_user()
    for n in range(first, first + count):
        operation = Operation.RESTART if n % 10 == 0 else Operation.VERIFY
        log = Subject(operation, f"op-{n:06d}", f"ct{n % 100:03d}", "slack:U0ALICE")
        log.append(db, Requested.of(origin, checks=list(CHECKS)))
        if operation == Operation.RESTART:
            log.append(db, Approved(f"{n:064x}", "slack:U0ALICE"))
        for i, name in enumerate(CHECKS):
            evidence = Evidence.of(f"sha256sum -- /srv/{name}", 0, "ok " * 20, 0.01 * (i + 1 + n % 7))
            log.append(db, Check.of(Finding(name, CheckStatus.PASS, "fine", evidence)))
        log.append(db, Finished(Verdict.FAIL if n % 13 == 0 else Verdict.PASS, duration_s=1.5))


async def scrape_times(operations: int, scrapes: int, folder: Path) -> tuple[list[float], list[float], int, float]:
    """Seconds per scrape over HTTP, seconds per scrape rendered in the process (the chain read and the text, no
    HTTP), the scrape's size in bytes, and the seconds spent recording."""
    store = AuditStore.open(folder / f"audit-{operations}.db")
    metrics = Metrics()
    try:
        with metrics.installed():
            started = time.perf_counter()
            for first in range(0, operations, CHUNK):
                count = min(CHUNK, operations - first)
                await store.write(lambda db, first=first, count=count: _record(db, first, count))
            recorded = time.perf_counter() - started
        stop, port = await start_metrics_server(metrics, store, "127.0.0.1", 0)
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                url = f"http://127.0.0.1:{port}/metrics"
                size = len((await client.get(url)).content)  # a first scrape, not timed (connection set up)
                times = []
                for _ in range(scrapes):
                    began = time.perf_counter()
                    response = await client.get(url)
                    times.append(time.perf_counter() - began)
                    assert response.status_code == 200
            rendered = []
            for _ in range(scrapes):
                began = time.perf_counter()
                await metrics.scrape(store)
                rendered.append(time.perf_counter() - began)
        finally:
            await stop()
    finally:
        store.close()
    return times, rendered, size, recorded


async def run(operations: int, scrapes: int) -> dict[str, dict[str, float]]:
    """By size (0, a tenth, all): ms per scrape (median, fastest; in-process median), bytes, ratio to the empty one."""
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="proofbot-metrics-bench-") as folder:
        for size in (0, operations // 10, operations):
            times, rendered, size_bytes, recorded = await scrape_times(size, scrapes, Path(folder))
            figures[str(size)] = {"ms": statistics.median(times) * 1000, "min_ms": min(times) * 1000,
                                  "render_ms": statistics.median(rendered) * 1000, "bytes": size_bytes,
                                  "recorded_s": recorded}
    for row in figures.values():
        row["ratio"] = row["ms"] / figures["0"]["ms"]
        row["min_ratio"] = row["min_ms"] / figures["0"]["min_ms"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--operations", type=int, default=10_000)
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    figures = asyncio.run(run(args.operations, args.scrapes))
    print(f"/metrics scrape over HTTP on loopback, {args.scrapes} scrapes each (each reads the chain length; "
          f"the fastest is the cost without the machine's other load)")
    for size, row in figures.items():
        print(f"  {int(size):>7,} operations: median {row['ms']:6.2f} ms, fastest {row['min_ms']:5.2f} ms, "
              f"in-process {row['render_ms']:5.2f} ms; {row['bytes']:>6,.0f} bytes; vs the empty store: "
              f"{row['ratio']:.2f}x median, {row['min_ratio']:.2f}x fastest")
    print(f"  (recording {args.operations:,} operations took {figures[str(args.operations)]['recorded_s']:.1f} s)")

if __name__ == "__main__":
    main()
