"""Tier 2: the SQLite audit file stops taking writes while proofbot works (a filesystem filled, a file read only): the
CLI exits 3 with one line saying so and what to do, claims nothing it could not record, and the log written up to
there verifies. The database lives on a small tmpfs (or a read-only bind) in a mount namespace of its own
(``unshare -m``), around the real ``proofbot`` CLI; the host is a loopback lab host (bot/demo/host.py)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, demo_host
from commands.store.chain import ChainReport, verify_chain
from commands.store.db import AuditStore
from commands.vocabulary import EventKind
from tests.lab import require_root_netns, skip_or_fail

pytestmark = pytest.mark.tier2
HOST = "ct142"
PROOFBOT = str(Path(sys.executable).with_name("proofbot"))
# A tmpfs of 2 MiB, filled but for ROOM bytes, then the CLI; the database (and its write-ahead log) copied out.
FULL = r'''
set -u
dir=$1; seed=$2; room=$3; out=$4; shift 4
mount -t tmpfs -o size=2m tmpfs "$dir" || exit 90
cp "$seed" "$dir/audit.db"
dd if=/dev/zero of="$dir/fill" bs=4096 2>/dev/null
truncate -s -"$room" "$dir/fill" || exit 91
"$@" --db "$dir/audit.db" > "$out/stdout" 2> "$out/stderr"; echo $? > "$out/rc"
rm -f "$dir/fill"
cp "$dir"/audit.db* "$out/"
'''
# The database file alone bound read-only over itself (its folder stays writable): SQLite opens it read only.
READ_ONLY = r'''
set -u
dir=$1; seed=$2; room=$3; out=$4; shift 4
cp "$seed" "$dir/audit.db"
mount --bind -o ro "$dir/audit.db" "$dir/audit.db" || exit 90
"$@" --db "$dir/audit.db" > "$out/stdout" 2> "$out/stderr"; echo $? > "$out/rc"
umount "$dir/audit.db"
cp "$dir"/audit.db* "$out/"
'''


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    chain: ChainReport  # `audit verify`'s walk of what was written
    events: list[tuple[str, str | None]]  # (kind, verdict) in order

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("proofbot:")]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def host() -> AsyncIterator[DemoHost]:
    reason = require_root_netns()
    if reason:
        skip_or_fail(reason)
    async with demo_host(HOST) as lab_host:
        yield lab_host


async def run_cli(script: str, host: DemoHost, tmp_path: Path, room: int, *argv: str) -> Run:
    """``proofbot ARGV --db`` on a database already migrated, in a mount namespace of its own."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump(host.inventory(), sort_keys=False))
    seed, mount, out = tmp_path / "seed.db", tmp_path / "mnt", tmp_path / "out"
    AuditStore.open(seed).close()
    mount.mkdir()
    out.mkdir()
    process = await asyncio.create_subprocess_exec(
        "unshare", "-m", "sh", "-c", script, "sh", str(mount), str(seed), str(room), str(out),
        PROOFBOT, *argv, HOST, "--inventory", str(inventory))
    await asyncio.wait_for(process.wait(), timeout=240)
    assert process.returncode == 0, f"the namespace's script failed ({process.returncode})"
    store = AuditStore.open(out / "audit.db")
    try:
        chain = await verify_chain(store)
        events = await store.read(lambda conn: conn.execute(
            "SELECT kind, json_extract(details, '$.verdict') FROM events ORDER BY id").fetchall())
    finally:
        store.close()
    return Run(int((out / "rc").read_text()), (out / "stdout").read_text(), (out / "stderr").read_text(), chain,
               events)


def assert_said_once(run: Run, cause: str, what_to_do: str) -> None:
    assert run.code == 3, run
    assert "Traceback" not in run.stderr, run.stderr
    assert len(run.error_lines()) == 1, run.stderr
    line = run.error_lines()[0]
    assert "could not record in the audit database" in line and cause in line, line
    assert what_to_do in run.stderr, run.stderr
    assert run.chain.intact, run.chain
    assert EventKind.FINISHED not in [kind for kind, _ in run.events], "no ending claimed past the failure"


async def test_a_filesystem_full_during_a_verify_is_said_once_exit_3_and_the_log_up_to_there_verifies(
        host: DemoHost, tmp_path: Path) -> None:
    # Room for the request (one transaction), not for the checks' batch after it.
    run = await run_cli(FULL, host, tmp_path, 90_000, "verify")
    assert_said_once(run, "database or disk is full", "free space on the filesystem that holds")
    assert "nothing of it was written" in run.stderr
    assert run.events[:1] == [(EventKind.REQUESTED, None)], "the request was recorded, the failure came after"
    assert "PASS" not in run.stdout and "FAIL" not in run.stdout, run.stdout


async def test_a_read_only_audit_file_is_said_once_exit_3_and_nothing_is_written(
        host: DemoHost, tmp_path: Path) -> None:
    run = await run_cli(READ_ONLY, host, tmp_path, 0, "verify")
    assert_said_once(run, "attempt to write a readonly database", "writable by the user proofbot runs as")
    assert run.events == []


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


async def test_a_filesystem_full_during_a_restore_leaves_each_file_the_original_or_the_backup(
        host: DemoHost, tmp_path: Path) -> None:
    before, backup = digests(host.live_dir), digests(host.backup_dir)
    entries = set(os.listdir(host.live_dir))
    # Room for the request, the plan, its approval and the first steps: the cut falls in the apply.
    run = await run_cli(FULL, host, tmp_path, 300_000, "restore", "--yes")
    assert_said_once(run, "database or disk is full", "free space on the filesystem that holds")
    kinds = [kind for kind, _ in run.events]
    assert kinds[:3] == [EventKind.REQUESTED, EventKind.PLAN_SHOWN, EventKind.APPROVED], kinds
    assert EventKind.STEP in kinds, "the cut came once the restore was applying"
    now = digests(host.live_dir)
    left = set(os.listdir(host.live_dir)) ^ entries
    assert not left, f"added or left behind beside the live files: {sorted(left)}"
    for name, digest in now.items():
        assert digest in (before[name], backup.get(name)), f"{name} is neither the original nor the backup"
