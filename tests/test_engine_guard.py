"""The container engine's CLI runs as root on the host only when nobody but root can change it: the guard run
by the real `sh` and `stat` of this machine on CLIs made here (root-owned, writable by others, in a dir others
can write, missing, a symlink), and what verify's main-pid says of a refused engine."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from commands.checks.docker import docker_main_pid_finding
from commands.checks.docker_state import state_step
from commands.checks.engine_guard import guarded
from commands.command_result import CommandResult
from commands.inventory import parse_inventory

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the CLIs made here must be owned by root")


def _cli(path: Path, mode: int, marker: Path) -> Path:
    """A stand-in engine CLI that leaves a marker when it runs."""
    path.write_text(f"#!/bin/sh\necho engine ran \"$@\"\ntouch {marker}\n")
    path.chmod(mode)
    return path


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(guarded(argv), capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    """A root-owned mode-755 dir whose parents are too (/tmp, where pytest's dirs sit, is world-writable)."""
    safe = Path(tempfile.mkdtemp(prefix="pb-engine-", dir="/var/lib"))
    safe.chmod(0o755)
    try:
        yield safe
    finally:
        shutil.rmtree(safe)


def test_a_root_owned_cli_runs(place: Path) -> None:
    marker = place / "ran"
    run = _run([str(_cli(place / "docker", 0o755, marker)), "inspect", "x"])
    assert run.returncode == 0 and run.stdout == "engine ran inspect x\n" and marker.exists()


@pytest.mark.parametrize(("cli_mode", "dir_mode", "why"), [
    (0o777, 0o755, "docker is writable by every user (owner uid 0, group gid 0, mode 777)"),
    (0o755, 0o777, "is writable by every user (owner uid 0, group gid 0, mode 777)"),
])
def test_a_cli_others_can_change_is_never_run(place: Path, cli_mode: int, dir_mode: int, why: str) -> None:
    marker = place / "ran"
    cli = _cli(place / "docker", cli_mode, marker)
    place.chmod(dir_mode)
    run = _run([str(cli), "inspect", "x"])
    assert run.returncode == 126, run.stdout + run.stderr
    assert run.stdout.startswith(f"proofbot: engine CLI {cli} refused, nothing run: ") and why in run.stdout
    assert not marker.exists()


def test_a_symlinked_cli_is_followed_and_each_step_checked(place: Path) -> None:
    marker = place / "ran"
    (place / "bin").mkdir()
    (place / "bin").chmod(0o777)  # its link's target sits in a dir others can write
    target = _cli(place / "bin" / "docker", 0o755, marker)
    (place / "docker").symlink_to(target)
    run = _run([str(place / "docker"), "ps"])
    assert run.returncode == 126 and f"{place}/bin is writable by every user" in run.stdout
    assert not marker.exists()


def test_a_cli_not_on_the_path_says_so() -> None:
    run = _run(["proofbot-no-such-engine", "ps"])
    assert (run.returncode, run.stdout) == (127, "proofbot: engine CLI proofbot-no-such-engine is not on the PATH: "
                                                 "nothing run\n")


def test_main_pid_of_a_refused_engine_could_not_check_saying_why(place: Path) -> None:
    cli = _cli(place / "docker", 0o777, place / "ran")
    inventory = parse_inventory(f"hosts: {{ct: {{address: 10.0.0.1, service: {{manager: docker, container: svc, "
                                f"engine: {cli}, health_url: 'http://127.0.0.1:1/health'}}}}}}", "inventory.yml")
    service = inventory.host("ct").service
    assert service is not None
    step = state_step(service)
    run = subprocess.run(["sh", "-c", step.text], capture_output=True, timeout=30, check=False)
    finding = docker_main_pid_finding("svc", 10, CommandResult(step.shown, run.returncode, run.stdout, 0.1))
    assert finding.status == "error", finding
    assert finding.summary.startswith(f"could not read the state of container svc: proofbot: engine CLI {cli} "
                                      "refused, nothing run:"), finding.summary
    assert step.shown.startswith(f"{cli} inspect --type container")
    assert not (place / "ran").exists()


def test_a_sticky_dir_above_is_no_way_in_but_not_as_the_cli_s_own_dir(place: Path) -> None:
    """As /var/tmp above a lab's root-only wrapper dir: nobody else can rename or remove root's entries there; but
    the CLI's own dir may not be one (others could add a name beside it: a module a Python CLI imports first)."""
    marker = place / "ran"
    sticky = place / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "wrapper").mkdir(mode=0o700)
    run = _run([str(_cli(sticky / "wrapper" / "docker", 0o755, marker)), "ps"])
    assert run.returncode == 0 and marker.exists(), run.stdout
    marker.unlink()
    run = _run([str(_cli(sticky / "docker", 0o755, marker)), "ps"])
    assert run.returncode == 126 and f"{sticky} is writable by every user (owner uid 0, group gid 0, mode 1777)" \
        in run.stdout, run.stdout
    assert not marker.exists()
