"""Tier 2, real Podman (Debian's 4.3.1 with runc): `proofbot verify` of services run as Podman containers inside a
namespace host, over real OpenSSH to that host, where the podman CLI runs. The service is the lab's stand-in
(bot/demo/service.py) in the lab's bookworm rootfs imported as an image, `--network host --init` (catatonit).
One topology for the module: one host, one Podman storage, one container per case."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan
from commands.verify import verify as verify_core
from tests.conftest import run_cli, write_inventory
from tests.lab import UNAVAILABLE_ENV, skip_or_fail
from tests.lab.common import LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import SERVICE_SCRIPT, NetnsHost, NetnsLab
from tests.lab.podman import IMAGE, Podman, require_podman, start_podman, stop_podman
from tests.lab.waits import until

pytestmark = [pytest.mark.podman, pytest.mark.tier2, pytest.mark.timeout(600)]

SCRIPT = "/srv/app/fake_llm.py"  # inside each container, bind-mounted read-only
# from the lab host's own copy (SERVICE_SCRIPT): Podman runs inside the host, whose /tmp is its own, so a
# repository cloned under /tmp is not there
FLAG = "--speculative-algorithm NEXTN"
# loop: made by its test, its command exits at once; flaky: serves once, then every start after it exits 3
PORTS = {"svc": 30011, "loop": 30012, "flaky": 30013, "bridged": 30014}
ROLL_PORT = 30015  # the rolling restart's own crash-looping container, made by its test
# A first start serves; a later start of the same container (its /tmp is the container's own layer) exits 3.
FLAKY = (f"if [ -e /tmp/ran ]; then exit 3; fi; touch /tmp/ran; exec python3 {SCRIPT} --host 127.0.0.1 "
         f"--port {PORTS['flaky']} {FLAG}")


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


def _run(podman: Podman, name: str, *service_args: str, restart: str = "no", network: str = "host") -> None:
    listen = "127.0.0.1" if network == "host" else "0.0.0.0"
    podman.podman("run", "-d", "--pull=never", "--name", name, "--init", "--network", network,
                  f"--restart={restart}", "-v", f"{SERVICE_SCRIPT}:{SCRIPT}:ro", IMAGE, "python3", SCRIPT, "--host",
                  listen, "--port", str(PORTS[name]), *service_args)


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
            # The lab's own /24 (claimed for this run), its top /27: a bridge only in the host's namespace
            _run(podman, "bridged", *FLAG.split(), network=podman.bridge(f"10.231.{netns_lab.octet}.192/27"))
            podman.podman("run", "-d", "--pull=never", "--name", "flaky", "--init", "--network", "host",
                          "--restart=always", "-v", f"{SERVICE_SCRIPT}:{SCRIPT}:ro", IMAGE, "sh", "-c", FLAKY)
            yield netns_lab, PodmanLab(host, podman)
        finally:
            stop_podman(podman)


async def verify(lab: tuple[NetnsLab, PodmanLab], name: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    inventory = write_inventory(tmp_path / "inventory.yml", lab[1].document(lab[0]))
    run = await run_cli("verify", name, "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.stdout.strip(), run.stderr
    return run.code, {check["name"]: check for check in json.loads(run.stdout)["checks"]}


async def verify_here(lab: tuple[NetnsLab, PodmanLab], name: str, tmp_path: Path, backup: str | None = None,
                      document: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The same core in this process (the verdict and each check's JSON): for the waits and polls, where a
    Python start-up per attempt would cost more than the verify."""
    document = document or lab[1].document(lab[0])
    host = parse_inventory(yaml.safe_dump(document), "inventory.yml").host(name)
    audit = AuditStore.open(tmp_path / "here.db")
    try:
        result = await verify_core(VerifyPlan.for_host(host, backup), origin=Origin.local_user(), audit=audit)
    finally:
        audit.close()
    return result.verdict, {finding.name: json.loads(json.dumps(finding.to_json())) for finding in result.checks}


async def passing(lab: tuple[NetnsLab, PodmanLab], name: str, tmp_path: Path) -> dict[str, Any]:
    """The checks of the first verify that passes (a container younger than min_uptime_s only warns)."""
    seen: dict[str, Any] = {}
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        seen["verdict"], seen["checks"] = await verify_here(lab, name, tmp_path)
        if seen["verdict"] == "pass":
            checks: dict[str, Any] = seen["checks"]
            return checks
        assert asyncio.get_running_loop().time() < deadline, seen
        await asyncio.sleep(0.3)


async def test_clean_container_passes_and_catatonits_child_is_the_main_pid(lab: tuple[NetnsLab, PodmanLab],
                                                                           tmp_path: Path) -> None:
    await passing(lab, "svc", tmp_path)
    code, checks = await verify(lab, "svc", tmp_path)  # as a user runs it
    assert code == 0, checks
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
    exit code. A run caught alive is younger than min_uptime_s: a warning; catatonit caught after its child
    exited: a fail; never a pass. The loop lives only for this test (each restart costs a podman process)."""
    podman = lab[1].podman
    podman.podman("run", "-d", "--pull=never", "--name", "loop", "--init", "--network", "host",
                  "--restart=always", IMAGE, "sh", "-c", "exit 3")
    try:
        await until("loop restarted by its policy", lambda: int(podman.inspect("loop", "{{.RestartCount}}")) > 0,
                    timeout_s=60, interval_s=0.2)
        seen: list[str] = []
        deadline = asyncio.get_running_loop().time() + 90
        while not seen or not seen[-1].startswith("loop is in a crash loop"):
            assert asyncio.get_running_loop().time() < deadline, seen
            verdict, checks = await verify_here(lab, "loop", tmp_path)
            main = checks["main-pid"]
            seen.append(main["summary"])
            assert main["status"] in ("fail", "warn"), main
    finally:
        podman.podman("rm", "--force", "--time", "0", "loop", check=False)
    assert verdict == "fail"
    assert main["summary"].startswith("loop is in a crash loop: stopped between runs (Pid: 0), last exit code 3 at ")
    assert "its restart policy (always) has restarted it" in main["summary"]


async def restart(lab: tuple[NetnsLab, PodmanLab], name: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    """`proofbot restart NAME --yes`: over SSH into the namespace host, as proofbot always runs it."""
    inventory = write_inventory(tmp_path / "inventory.yml", lab[1].document(lab[0]))
    run = await run_cli("restart", name, "--yes", "--json", "--inventory", str(inventory),
                        "--db", str(tmp_path / "a.db"))
    assert run.stdout.strip(), run.stderr
    out = json.loads(run.stdout)
    return run.code, {check["name"]: check for check in out["checks"]}


async def test_podman_restart_is_proven_and_keeps_the_container_in_the_hosts_network(
        lab: tuple[NetnsLab, PodmanLab], tmp_path: Path) -> None:
    """A new StartedAt later than the request, a new PID > 0, up min_uptime_s: proven. `podman restart` run from
    another network namespace moves a `--network host` container there; run as proofbot runs it, over SSH into
    the host, the container's network namespace after the restart is still the host's."""
    podman_lab = lab[1]
    before = (await passing(lab, "svc", tmp_path))["main-pid"]["details"]
    host_net = await asyncio.to_thread(os.readlink, f"/proc/{podman_lab.host.pid}/ns/net")
    assert await asyncio.to_thread(podman_lab.podman.net_namespace, "svc") == host_net
    code, checks = await restart(lab, "svc", tmp_path)
    assert code == 0, checks
    main = checks["main-pid"]
    assert main["status"] == "pass" and main["summary"].startswith("new run: StartedAt "), main
    _, _, child = await asyncio.to_thread(podman_lab.init_child, "svc")
    assert main["details"]["new_pids"][-1] == child != before["main_pid"]
    assert main["details"]["old_started_at"].startswith(before["started_at"][:19])
    assert main["details"]["requested_at"] > before["started_at"]
    assert await asyncio.to_thread(podman_lab.podman.net_namespace, "svc") == host_net
    assert checks["health"]["status"] == "pass"  # the host's loopback: it is still in the host's network


async def test_a_restart_into_a_crash_loop_is_named_never_proven(lab: tuple[NetnsLab, PodmanLab],
                                                                 tmp_path: Path) -> None:
    """flaky serves until restarted; every start after that exits 3 and Podman starts it again at once."""
    await passing(lab, "flaky", tmp_path)
    try:
        code, checks = await restart(lab, "flaky", tmp_path)
    finally:
        lab[1].podman.podman("rm", "--force", "--time", "0", "flaky", check=False)  # its loop costs CPU
    assert code == 1
    main = checks["main-pid"]
    assert main["status"] == "fail", main
    assert main["summary"].startswith("flaky is in a crash loop: "), main
    assert "exit codes seen: 3" in main["summary"] and 3 in main["details"]["exit_codes"]


async def test_a_rolling_restart_over_three_podman_hosts_halts_at_the_crash_looping_one(
        lab: tuple[NetnsLab, PodmanLab], tmp_path: Path) -> None:
    """svc, roll, bridged one at a time: svc proven, roll (serves once, then every start exits 3) named a crash loop
    and the rollout halts there, bridged never restarted."""
    podman_lab = lab[1]
    roll = FLAKY.replace(f"--port {PORTS['flaky']}", f"--port {ROLL_PORT}")
    podman_lab.podman.podman("run", "-d", "--pull=never", "--name", "roll", "--init", "--network", "host",
                             "--restart=always", "-v", f"{SERVICE_SCRIPT}:{SCRIPT}:ro", IMAGE, "sh", "-c", roll)
    document = podman_lab.document(lab[0])
    document["hosts"]["roll"] = {**document["hosts"]["svc"], "service": {
        **document["hosts"]["svc"]["service"], "container": "roll", "health_url": f"http://127.0.0.1:{ROLL_PORT}/health"}}
    document["groups"] = {"fleet": ["svc", "roll", "bridged"]}
    document["fleet"] = {"restart_batch": 1}
    try:
        for name in ("svc", "roll", "bridged"):
            await until(f"{name} running", lambda name=name: podman_lab.podman.inspect(
                name, "{{.State.Running}}") == "true", interval_s=0.2)
        before = {name: podman_lab.init_child(name)[2] for name in ("svc", "bridged")}
        inventory = write_inventory(tmp_path / "fleet.yml", document)
        run = await run_cli("restart", "fleet", "--yes", "--json", "--inventory", str(inventory),
                            "--db", str(tmp_path / "fleet.db"))
    finally:
        podman_lab.podman.podman("rm", "--force", "--time", "0", "roll", check=False)  # its loop costs CPU
    result = json.loads(run.stdout)
    assert run.code == 1, result
    assert (result["done"], result["failed"], result["untouched"]) == (["svc"], ["roll"], ["bridged"])
    assert "halted after batch 2 of 3: roll failed its proof" in result["halted"]
    by_host = {host["host"]: host for host in result["hosts"]}
    assert by_host["svc"]["new_pid"] == podman_lab.init_child("svc")[2] != before["svc"]
    looping = {check["name"]: check for check in by_host["roll"]["checks"]}["main-pid"]
    assert looping["status"] == "fail" and looping["summary"].startswith("roll is in a crash loop: "), looping
    assert podman_lab.init_child("bridged")[2] == before["bridged"]  # never restarted


def test_under_ci_a_machine_that_cannot_run_podman_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the module's fixture does with the reason (in-process: a pytest subprocess would cost ~18 s of CI)."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("PROOFBOT_REQUIRE_LABS", raising=False)
    monkeypatch.setenv(UNAVAILABLE_ENV, "podman")
    reason = require_podman()
    assert reason == f"podman made unavailable by {UNAVAILABLE_ENV}"
    with pytest.raises(pytest.fail.Exception, match=r"podman made unavailable .* a lab tier that cannot run is a "
                       r"failure"):
        skip_or_fail(reason)


async def test_bridge_network_health_is_asked_at_the_containers_address(lab: tuple[NetnsLab, PodmanLab],
                                                                        tmp_path: Path) -> None:
    """Nothing listens on the host's 127.0.0.1:30014: only the container's address from podman inspect answers."""
    checks = await passing(lab, "bridged", tmp_path)
    [address] = (await asyncio.to_thread(lab[1].podman.inspect, "bridged",
                                         "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")).split()
    assert address.startswith(f"10.231.{lab[0].octet}.")
    health = checks["health"]
    assert health["status"] == "pass", health
    assert f"(at the container's address: GET http://{address}:{PORTS['bridged']}/health" in health["summary"]


async def test_stale_process_is_judged_against_podmans_started_at(lab: tuple[NetnsLab, PodmanLab],
                                                                  tmp_path: Path) -> None:
    """A backup's live file is a path inside the container (read through /proc/PID/root): written after the
    container's StartedAt it is a stale process; set back to its old time, the same container passes."""
    live = "/opt/pb/spec_info.py"  # in the container's own layer, made there by the test

    def inside(script: str) -> None:
        lab[1].podman.podman("exec", "svc", "sh", "-c", script)

    document = lab[1].document(lab[0])
    backup_dir = lab[1].host.backups_block()["pre-ddtree"]["dir"]
    document["hosts"]["svc"]["backups"] = {"pre-ddtree": {"dir": backup_dir, "files": {"spec_info.py": live}}}
    await asyncio.to_thread(inside, f"mkdir -p /opt/pb && echo x > {live} && touch -d @1700000000 {live}")

    async def stale() -> dict[str, Any]:
        _, checks = await verify_here(lab, "svc", tmp_path, "pre-ddtree", document)
        finding: dict[str, Any] = checks["stale-process"]
        return finding

    await passing(lab, "svc", tmp_path)
    assert (await stale())["status"] == "pass"
    await asyncio.to_thread(inside, f"touch {live}")  # now: after the container started
    try:
        finding = await stale()
    finally:
        await asyncio.to_thread(inside, f"touch -d @1700000000 {live}")
    assert finding["status"] == "warn", finding
    _, _, child = await asyncio.to_thread(lab[1].init_child, "svc")
    assert finding["summary"].startswith(f"PID {child} started "), finding
    assert live in json.dumps(finding)
