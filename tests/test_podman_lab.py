"""Tier 2, real Podman (Debian's 4.3.1 with runc): `proofbot verify` of services run as Podman containers inside a
namespace host, over real OpenSSH to that host, where the podman CLI runs. The service is the lab's stand-in
(bot/demo/service.py) in the lab's bookworm rootfs imported as an image, `--network host --init` (catatonit).
One topology for the module: one host, one Podman storage, one container per case."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_inventory
from tests.lab import skip_or_fail
from tests.lab.common import FAKE_LLM, LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsHost, NetnsLab
from tests.lab.podman import IMAGE, Podman, require_podman, start_podman, stop_podman
from tests.lab.waits import until

pytestmark = [pytest.mark.podman, pytest.mark.tier2, pytest.mark.timeout(600)]

SCRIPT = "/srv/app/fake_llm.py"  # inside each container, bind-mounted read-only
FLAG = "--speculative-algorithm NEXTN"
PORTS = {"svc": 30011, "loop": 30012}  # loop: made by its test, its command exits at once


@dataclass
class PodmanLab:
    host: LabHost
    podman: Podman

    def document(self, lab: NetnsLab) -> dict[str, Any]:
        """The inventory: one entry per container, all on the one lab host."""
        document = lab.inventory()
        document["hosts"] = {name: {
            "address": self.host.address, "port": self.host.port,
            "service": {"manager": "podman", "container": name, "engine": self.podman.cli,
                        "health_url": f"http://127.0.0.1:{port}/health", "expect_flags": [FLAG],
                        "forbid_flags": ["--enable-ddtree"], "min_uptime_s": 1}}
            for name, port in PORTS.items()}
        return document

    def init_child(self, name: str) -> tuple[int, str, int]:
        """The container's PID 1 on the host (catatonit), its comm and its one child, read from /proc here."""
        init_pid = int(self.podman.inspect(name, "{{.State.Pid}}"))
        [child] = Path(f"/proc/{init_pid}/task/{init_pid}/children").read_text().split()
        return init_pid, Path(f"/proc/{init_pid}/comm").read_text().strip(), int(child)


def _run(podman: Podman, name: str, *service_args: str, restart: str = "no") -> None:
    podman.podman("run", "-d", "--pull=never", "--name", name, "--init", "--network", "host",
                  f"--restart={restart}",
                  "-v", f"{FAKE_LLM}:{SCRIPT}:ro", IMAGE, "python3", SCRIPT, "--host", "127.0.0.1",
                  "--port", str(PORTS[name]), *service_args)


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[NetnsLab, PodmanLab]]:
    reason = require_podman()
    if reason:
        skip_or_fail(reason)
    with running_lab(NetnsLab, {"ct129": Scenario()}) as netns_lab:
        host = netns_lab.hosts["ct129"]
        assert isinstance(host, NetnsHost)
        podman = start_podman(host)
        try:
            _run(podman, "svc", *FLAG.split())
            yield netns_lab, PodmanLab(host, podman)
        finally:
            stop_podman(podman)


async def verify(lab: tuple[NetnsLab, PodmanLab], name: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    inventory = write_inventory(tmp_path / "inventory.yml", lab[1].document(lab[0]))
    run = await run_cli("verify", name, "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.stdout.strip(), run.stderr
    return run.code, {check["name"]: check for check in json.loads(run.stdout)["checks"]}


async def passing(lab: tuple[NetnsLab, PodmanLab], name: str, tmp_path: Path) -> dict[str, Any]:
    """The checks of the first verify that passes (a container younger than min_uptime_s only warns)."""
    seen: dict[str, Any] = {}
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        seen["code"], seen["checks"] = await verify(lab, name, tmp_path)
        if seen["code"] == 0:
            checks: dict[str, Any] = seen["checks"]
            return checks
        assert asyncio.get_running_loop().time() < deadline, seen
        await asyncio.sleep(0.3)


async def test_clean_container_passes_and_catatonits_child_is_the_main_pid(lab: tuple[NetnsLab, PodmanLab],
                                                                           tmp_path: Path) -> None:
    checks = await passing(lab, "svc", tmp_path)
    assert {name: check["status"] for name, check in checks.items()} == {
        "main-pid": "pass", "health": "pass", "cmdline": "pass"}
    init_pid, comm, child = lab[1].init_child("svc")
    assert comm == "podman-init"  # catatonit, as Podman runs it
    main = checks["main-pid"]
    assert main["details"]["main_pid"] == child and main["details"]["container_pid"] == init_pid
    assert f"main PID {child} (child of podman-init, PID {init_pid}: the container's PID 1)" in main["summary"]
    assert main["evidence"]["command"].startswith(f"{lab[1].podman.cli} inspect --type container")
    assert '"Running":true' in main["evidence"]["output"]
    assert checks["cmdline"]["summary"].startswith(f"PID {child}: 1 expected flag(s) present")
    assert f"--port {PORTS['svc']}" in checks["cmdline"]["evidence"]["output"]


async def test_crash_loop_is_named_never_passed(lab: tuple[NetnsLab, PodmanLab], tmp_path: Path) -> None:
    """Podman 4.3 restarts at once and reads `stopped, Pid 0` between runs: a fail naming the crash loop and the
    exit code. A run caught alive is younger than min_uptime_s: a warning, never a pass. The loop lives only for
    this test (each restart costs a podman process on a shared machine)."""
    podman = lab[1].podman
    podman.podman("run", "-d", "--pull=never", "--name", "loop", "--init", "--network", "host",
                  "--restart=always", IMAGE, "sh", "-c", "exit 3")
    try:
        await until("loop restarted by its policy", lambda: int(podman.inspect("loop", "{{.RestartCount}}")) > 0,
                    timeout_s=60, interval_s=0.2)
        seen: list[str] = []
        deadline = asyncio.get_running_loop().time() + 90
        while not seen or seen[-1] != "fail":
            assert asyncio.get_running_loop().time() < deadline, seen
            code, checks = await verify(lab, "loop", tmp_path)
            main = checks["main-pid"]
            seen.append(main["status"])
            assert main["status"] in ("fail", "warn"), main
    finally:
        podman.podman("rm", "--force", "--time", "0", "loop", check=False)
    assert code == 1
    assert main["summary"].startswith("loop is in a crash loop: stopped between runs (Pid: 0), last exit code 3 at ")
    assert "its restart policy (always) has restarted it" in main["summary"]
