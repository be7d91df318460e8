"""bench/metrics_bench.py runs end to end at a small size and prints its figures (the full run is 10,000)."""

from __future__ import annotations

import asyncio
import sys

from tests.conftest import REPO


async def test_the_metrics_bench_prints_a_scrape_time_per_size() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.metrics_bench", "--operations", "200", "--scrapes", "5", cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0].startswith("/metrics scrape over HTTP on loopback, 5 scrapes each")
    assert [line.split(" operations:")[0].strip() for line in lines[1:4]] == ["0", "20", "200"]
    assert all(" ms, fastest " in line and "x fastest" in line for line in lines[1:4])
    assert lines[1].endswith("vs the empty store: 1.00x median, 1.00x fastest")
