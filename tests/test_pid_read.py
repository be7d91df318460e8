"""Tier 1: the main-pid check's host-side script reads the main PID itself (real sh, sed, awk, cat on loopback).

A service manager stand-in earlier in the batch's PATH prints what a broken or hostile host
could: only a PID proper is read from, and nothing it printed runs.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path

import pytest

from bot.demo.host import DemoHost
from commands.checks.cmdline import cmdline_argv
from commands.checks.pid_read import as_read, cmdline_step, pid_step, process_start_steps, shell_pid
from commands.checks.service import main_pid_check
from commands.checks.stale import process_start_argvs
from commands.command_result import CommandResult
from commands.inventory import Service
from commands.ssh import BatchStep, ShellStep, connect
from commands.verify.runner import as_batch_step
from tests.test_ssh import host_of


def state_step(service: Service) -> BatchStep:
    """The main-pid check's one step: the manager's state, with the PID kept for the reads after it."""
    return as_batch_step(main_pid_check(service).steps()[0])


SUPERVISED = Service(manager="supervisord", unit="sglang", health_url="http://127.0.0.1:1/health")
SYSTEMD = Service(manager="systemd", unit="sglang.service", health_url="http://127.0.0.1:1/health")


async def read_with(host: DemoHost, tmp_path: Path, service: Service, says: str) -> list[CommandResult]:
    """Run verify's PID steps with the manager replaced by a script that prints ``says``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("supervisorctl", "systemctl"):
        fake = bin_dir / name
        fake.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(says)}\n")
        fake.chmod(0o755)
    path = ShellStep(f"PATH={shlex.quote(str(bin_dir))}:$PATH", "PATH=fake")
    async with connect(host_of(host)) as conn:
        steps = [state_step(service), pid_step(), cmdline_step(), *process_start_steps()]
        results = await conn.run_batch([path, *map(as_batch_step, steps)])
    return results[1:]


async def test_the_pid_the_manager_printed_is_the_one_read(clean_host: DemoHost, tmp_path: Path) -> None:
    sleeper = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)",
                                                   "--marker-flag")
    try:
        said = f"sglang                           RUNNING   pid {sleeper.pid}, uptime 0:00:01"
        state, pid, cmdline, stat, _, _ = await read_with(clean_host, tmp_path, SUPERVISED, said)
    finally:
        sleeper.kill()
        await sleeper.wait()
    assert state.text == said + "\n" and state.exit_status == 0
    assert shell_pid(pid) == sleeper.pid
    assert cmdline.output.split(b"\0")[:4] == [sys.executable.encode(), b"-c", b"import time; time.sleep(60)",
                                                b"--marker-flag"]
    assert stat.text.startswith(f"{sleeper.pid} (")
    shown = as_read([cmdline, stat], [cmdline_argv(sleeper.pid), process_start_argvs(sleeper.pid)[0]])
    assert [r.command for r in shown] == [f"cat /proc/{sleeper.pid}/cmdline",
                                          f"cat /proc/{sleeper.pid}/stat /proc/uptime"]


async def test_systemd_main_pid_is_read_from_its_one_line(clean_host: DemoHost, tmp_path: Path) -> None:
    said = f"MainPID={os.getpid()}\nActiveState=active\nSubState=running"
    state, pid, cmdline, *_ = await read_with(clean_host, tmp_path, SYSTEMD, said)
    assert "ActiveState=active" in state.text
    assert shell_pid(pid) == os.getpid() and cmdline.exit_status == 0 and cmdline.output


@pytest.mark.parametrize("said", [
    "sglang RUNNING pid 1;touch {mark}, uptime 0:00:01",
    "sglang RUNNING pid $(touch {mark}), uptime 0:00:01",
    "sglang RUNNING pid `touch {mark}`, uptime 0:00:01",
    "sglang RUNNING pid ../../{mark}, uptime 0:00:01",
    "sglang RUNNING pid 0001, uptime 0:00:01",
    "sglang RUNNING pid 12345678901, uptime 0:00:01",
    "other RUNNING pid 1, uptime 0:00:01",
    "MainPID=1 {mark}",
])
async def test_anything_but_a_pid_reads_nothing_and_runs_nothing(clean_host: DemoHost, tmp_path: Path,
                                                                said: str) -> None:
    mark = tmp_path / "ran"
    for service in (SUPERVISED, SYSTEMD):
        state, pid, cmdline, stat, _, _ = await read_with(clean_host, tmp_path, service, said.format(mark=mark))
        assert state.exit_status == 0
        assert pid.output == b"" and shell_pid(pid) is None
        assert cmdline.exit_status != 0 and cmdline.text == "no main PID to read\n"
        assert stat.exit_status != 0 and stat.text == "no main PID to read\n"
    assert not mark.exists()


async def test_the_managers_exit_status_is_the_steps_own(clean_host: DemoHost, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "supervisorctl").write_text("#!/bin/sh\necho 'sglang STOPPED Not started'\nexit 3\n")
    (bin_dir / "supervisorctl").chmod(0o755)
    async with connect(host_of(clean_host)) as conn:
        _, state, pid = await conn.run_batch([ShellStep(f"PATH={bin_dir}:$PATH", "PATH=fake"),
                                              state_step(SUPERVISED), as_batch_step(pid_step())])
    assert state.exit_status == 3 and state.text == "sglang STOPPED Not started\n"
    assert state.command == "supervisorctl status sglang" and shell_pid(pid) is None
