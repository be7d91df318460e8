"""bench/chain_bench.py keeps working: a small run appends from two processes at once on both backends and
finds each chain intact with every event in it."""

from __future__ import annotations

import asyncio
import sys

from tests.conftest import REPO


async def test_chain_bench_small_run(pg_url: str) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.chain_bench", "--events", "40", "--processes", "2", "--pg", pg_url, cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(300):
        out, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    rows = [line.split() for line in out.decode().splitlines()[2:]]
    assert [(row[0], row[1], row[2], row[-1]) for row in rows] == [
        ("sqlite", "2", "40", "intact"), ("postgresql", "2", "40", "intact")]
