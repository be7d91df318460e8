"""What people used to other CLIs expect: --version, one JSON object on stdout even for errors,
--strict for CI, a demo that refuses options it ignores and can be left running to explore."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from bot.demo.host import demo_host
from tests.conftest import REPO, run_cli, write_inventory

GOOD_FLAGS = ["--speculative-algorithm", "NEXTN"]


async def test_version_and_a_demo_that_refuses_what_it_would_ignore() -> None:
    version = await run_cli("--version")
    assert version.code == 0 and version.stdout.startswith("proofbot ")
    demo = await run_cli("demo", "--inventory", "inventory.yml")
    assert demo.code == 2 and "unrecognized arguments: --inventory" in demo.stderr


async def test_json_errors_are_one_json_object_on_stdout(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "i.yml", {"hosts": {"ct1": {"address": "127.0.0.1"}}})
    unknown = await run_cli("verify", "ct9", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    bad_usage = await run_cli("verify", "--json")
    for run, code in ((unknown, 2), (bad_usage, 2)):
        report = json.loads(run.stdout)
        assert run.code == code and report["schema_version"] == 1 and report["error"]["code"] == code
    assert "ct9" in json.loads(unknown.stdout)["error"]["message"]


async def test_strict_makes_a_warning_exit_1(tmp_path: Path) -> None:
    async with demo_host("ct134", patched=False, extra_file=False, flags=GOOD_FLAGS) as host:
        later = time.time() + 5  # a watched file newer than the running process: it runs old code
        os.utime(host.live_dir / "spec_info.py", (later, later))
        inventory = write_inventory(tmp_path / "i.yml", host.inventory())
        args = ("verify", "ct134", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
        plain, strict = await run_cli(*args), await run_cli(*args, "--strict")
    statuses = {c["name"]: c["status"] for c in json.loads(plain.stdout)["checks"]}
    assert statuses["stale-process"] == "warn" and json.loads(plain.stdout)["verdict"] == "pass"
    assert (plain.code, strict.code) == (0, 1)
    assert strict.stderr == "proofbot: --strict: exit 1: the verdict is PASS, but 1 check warned (stale-process)\n"


async def test_demo_keep_leaves_a_host_the_printed_commands_work_on(tmp_path: Path) -> None:
    demo = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "demo", "--keep", "--db", str(tmp_path / "demo.db"), cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert demo.stdout is not None
    printed: list[str] = []
    try:
        async with asyncio.timeout(240):
            while not any(line.strip().startswith("proofbot audit ct129") for line in printed):
                line = (await demo.stdout.readline()).decode()
                assert line, "the demo ended before printing its commands"
                printed.append(line)
        verify_line = next(line.strip() for line in printed if line.strip().startswith("proofbot verify ct129"))
        verify = await run_cli(*shlex.split(verify_line)[1:])
        assert verify.code == 0 and "ct129: PASS" in verify.stdout, verify.stdout + verify.stderr
        lab_root = next(line.split("files under ")[1].strip() for line in printed if "files under" in line)
        assert await asyncio.to_thread(os.path.exists, lab_root)
    finally:
        demo.send_signal(signal.SIGINT)
        await asyncio.wait_for(demo.wait(), 60)
    assert demo.returncode == 0
    assert not await asyncio.to_thread(os.path.exists, lab_root), "Ctrl-C stops the lab host and removes it"
