"""README's first command: `proofbot demo` tells the whole story and cleans up after itself."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.conftest import run_cli


async def test_demo_plays_the_story_and_leaves_an_audit_log(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    run = await run_cli("demo", "--db", str(db))
    assert run.code == 0, run.stdout[-3000:] + run.stderr
    assert "✗ *cmdline* — PID" in run.stdout and "forbidden --enable-ddtree present" in run.stdout
    assert "[ Approve ]  [ Approve + move extras ]  [ Reject ]" in run.stdout
    # a long script or raw /proc line is cut in its reply: the thread's details file holds it whole
    assert "the whole command and output are in the details file at the end of this thread" in run.stdout
    assert "├─ [file] details-op-" in run.stdout
    assert "ct129 restore: PASS" in run.stdout
    # No backup knows sgl-kernel: its own RECORD names the edited and the added module.
    assert "✗ *package:sgl-kernel* — sgl-kernel 0.1.4 (installer pip): 2 problem(s): sgl_kernel/speculative.py " \
           "differs from RECORD" in run.stdout and "sgl_kernel/ddtree_kernels.py is not listed in RECORD" in run.stdout
    lab_root = next(line.split("files under ")[1] for line in run.stdout.splitlines() if "files under" in line)
    assert not await asyncio.to_thread(os.path.exists, lab_root), "the lab host is removed"
    kinds = [row[0] for row in sqlite3.connect(db).execute("SELECT kind FROM events ORDER BY id")]
    assert kinds.count("finished") == 6 and "approved" in kinds
    assert "ct129 restart: PASS" in run.stdout and "the old launch script is still in place" in run.stdout
    # Datasette-ready: a check's or step's own facts sit at the top of its details, never in a
    # `details` inside `details` (old rows keep theirs and still verify: nothing was rewritten).
    with closing(sqlite3.connect(db)) as conn:
        nested = conn.execute("SELECT count(*) FROM events WHERE kind IN ('check', 'step') "
                              "AND json_extract(details, '$.details') IS NOT NULL").fetchone()[0]
        hashes = conn.execute("SELECT json_extract(details, '$.live_sha256') FROM events WHERE kind = 'check' "
                              "AND json_extract(details, '$.name') LIKE 'file:%'").fetchall()
        pids = conn.execute("SELECT json_extract(details, '$.old_pid') FROM events WHERE kind = 'check' "
                            "AND operation = 'restart' AND json_extract(details, '$.name') = 'main-pid'").fetchall()
    assert nested == 0
    assert hashes and all(len(row[0]) == 64 for row in hashes)
    assert pids and all(isinstance(row[0], int) for row in pids)
