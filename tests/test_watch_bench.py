"""bench/watch_bench.py keeps working: a short simulated run prints the compact log's events against the naive."""

from __future__ import annotations

import asyncio
import re
import sys

from tests.conftest import REPO


async def test_watch_bench_small_run() -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.watch_bench", "--hosts", "50", "--days", "6", "--naive-runs", "2", cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(child.communicate(), 120)
    assert child.returncode == 0, err.decode()
    text = out.decode()
    # 6 days of 5-minute runs: 1728; three changes said, each its own message
    assert "50 hosts every 5 min for 6 simulated days: 1728 runs, 3 messages, 3 host changes" in text
    events = int(re.search(r"compact \(this watch\): ([\d,]+) events", text)[1].replace(",", ""))  # type: ignore[index]
    assert 1728 < events < 1728 + 3 * 20  # one per run, and per change the host's trail and its fleet's
