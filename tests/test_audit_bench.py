"""bench/audit_bench.py keeps working: a small run fills a valid chain and times the queries."""

from __future__ import annotations

import asyncio
import sys

from tests.conftest import REPO


async def test_audit_bench_small_run() -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.audit_bench", "--events", "2000", "--repeats", "1", cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 0, err.decode()
    text = out.decode()
    assert text.startswith("2000 events, 2") and "/audit ct129 (N=10)" in text
    assert "2000 events, intact" in text
