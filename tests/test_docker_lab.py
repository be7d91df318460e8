"""Tier 2, real Docker: `proofbot verify` of services run as containers by a private dockerd (Debian's 20.10) in
a namespace host's network, over real OpenSSH to that host, where the docker CLI runs. The service is the lab's
stand-in (bot/demo/service.py) in the lab's bookworm rootfs imported as an image, `--network host --init`.
One topology for the module: one host, one engine, one container per case."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.slack.app import BotContext, build_app
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.conftest import run_cli, write_inventory
from tests.lab import skip_or_fail
from tests.lab.common import FAKE_LLM, LabHost, Scenario
from tests.lab.docker import DOCKER, Engine, require_docker, start_engine, stop_engine
from tests.lab.fixtures import running_lab
from tests.lab.image import ensure_image
from tests.lab.netns import NetnsLab
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import slash_command_body

pytestmark = [pytest.mark.docker, pytest.mark.tier2, pytest.mark.timeout(600)]

IMAGE = "proofbot-lab:bookworm"
SCRIPT = "/srv/app/fake_llm.py"  # inside each container, bind-mounted read-only
FLAG = "--speculative-algorithm NEXTN"
PORTS = {"svc": 30001, "noflag": 30002, "stopme": 30003, "loop": 30004, "bridged": 30005,
         "ghost": 30006}  # ghost: in the inventory, never run
NETWORK = "pbnet"  # a bridge inside the lab host's network namespace only


@dataclass
class DockerLab:
    lab: NetnsLab
    host: LabHost
    engine: Engine
    workdir: Path

    def document(self) -> dict[str, Any]:
        """The inventory: one entry per container, all on the one lab host."""
        document = self.lab.inventory()
        document["hosts"] = {name: {
            "address": self.host.address, "port": self.host.port,
            "service": {"manager": "docker", "container": name,
                        "engine": {"cli": DOCKER, "host": self.engine.socket},
                        "health_url": f"http://127.0.0.1:{port}/health", "expect_flags": [FLAG],
                        "forbid_flags": ["--enable-ddtree"], "min_uptime_s": 1}}
            for name, port in PORTS.items()}
        return document

    def init_child(self, name: str) -> tuple[int, int]:
        """The container's PID 1 on the host (its init) and that init's one child, read from /proc here."""
        init_pid = int(self.inspect(name, "{{.State.Pid}}"))
        [child] = Path(f"/proc/{init_pid}/task/{init_pid}/children").read_text().split()
        return init_pid, int(child)

    def inspect(self, name: str, template: str) -> str:
        return self.engine.docker("inspect", "--format", template, name).stdout.strip()


def _run(engine: Engine, name: str, *service_args: str, restart: str = "no", network: str = "host") -> None:
    listen = "127.0.0.1" if network == "host" else "0.0.0.0"
    engine.docker("run", "-d", "--name", name, "--init", "--network", network, f"--restart={restart}",
                  "-v", f"{FAKE_LLM}:{SCRIPT}:ro", IMAGE, "python3", SCRIPT, "--host", listen,
                  "--port", str(PORTS[name]), *service_args)


@pytest.fixture(scope="module")
def docker_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerLab]:
    reason = require_docker("docker lab")
    if reason:
        skip_or_fail(reason)
    rootfs, _ = ensure_image()
    with running_lab(NetnsLab, {"ct129": Scenario()}) as lab:
        host = lab.hosts["ct129"]
        engine = start_engine(netns=host.netns)
        try:
            engine.import_rootfs(rootfs, IMAGE)
            _run(engine, "svc", *FLAG.split())
            _run(engine, "noflag")
            _run(engine, "stopme", *FLAG.split())
            _run(engine, "loop", *FLAG.split(), "--exit-after", "0.2", restart="always")
            # The lab's own /24 (claimed for this run), its top /27: a bridge that exists only in the host's netns
            engine.docker("network", "create", "--driver", "bridge", "--subnet", f"10.231.{lab.octet}.192/27",
                          NETWORK)
            _run(engine, "bridged", *FLAG.split(), network=NETWORK)
            yield DockerLab(lab, host, engine, tmp_path_factory.mktemp("docker-lab"))
        finally:
            stop_engine(engine)


async def verify(docker_lab: DockerLab, name: str, tmp_path: Path) -> tuple[int, dict[str, dict[str, Any]]]:
    inventory = write_inventory(tmp_path / "inventory.yml", docker_lab.document())
    run = await run_cli("verify", name, "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.stdout.strip(), run.stderr
    return run.code, {check["name"]: check for check in json.loads(run.stdout)["checks"]}


async def passing(docker_lab: DockerLab, name: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The checks of the first verify that passes (a container younger than min_uptime_s only warns)."""
    seen: dict[str, Any] = {}

    async def attempt() -> bool:
        seen["code"], seen["checks"] = await verify(docker_lab, name, tmp_path)
        return bool(seen["code"] == 0 and seen["checks"]["main-pid"]["status"] == "pass")

    deadline = asyncio.get_running_loop().time() + 30
    while not await attempt():
        assert asyncio.get_running_loop().time() < deadline, seen
        await asyncio.sleep(0.3)
    checks: dict[str, dict[str, Any]] = seen["checks"]
    return checks


async def test_healthy_container_passes_with_evidence(docker_lab: DockerLab, tmp_path: Path) -> None:
    checks = await passing(docker_lab, "svc", tmp_path)
    assert {name: check["status"] for name, check in checks.items()} == {
        "main-pid": "pass", "health": "pass", "cmdline": "pass"}
    init_pid, child = docker_lab.init_child("svc")
    main = checks["main-pid"]
    assert main["details"]["main_pid"] == child and main["details"]["container_pid"] == init_pid
    assert f"main PID {child} (child of docker-init, PID {init_pid}" in main["summary"]
    assert main["evidence"]["command"].startswith(f"{DOCKER} -H {docker_lab.engine.socket} inspect")
    assert '"Running":true' in main["evidence"]["output"]
    assert checks["cmdline"]["summary"].startswith(f"PID {child}: 1 expected flag(s) present")
    assert f"--port {PORTS['svc']}" in checks["cmdline"]["evidence"]["output"]


async def test_slack_verify_of_a_container_runs_the_same_checks(docker_lab: DockerLab, tmp_path: Path) -> None:
    """/verify from Slack (the real bolt app, signed request, the fake Web API): the same core, the same checks."""
    await passing(docker_lab, "svc", tmp_path)
    init_pid, child = docker_lab.init_child("svc")
    document = docker_lab.document()
    document["channels"] = ["C0OPS"]
    audit = AuditStore.open(tmp_path / "audit.db")
    secret = "test-signing-secret"
    try:
        async with FakeSlack(channels={"C0OPS": "ops"}, signing_secret=secret) as slack:
            app = build_app(BotContext(parse_inventory(yaml.safe_dump(document), "inventory.yml"), audit),
                            bot_token=slack.bot_token, signing_secret=secret, api_url=slack.api_url)
            async with serving(app) as url:
                body = slash_command_body("/verify", "svc", "U0ALICE", "C0OPS", slack.response_url(), "trigger-1")
                assert (await slack.deliver(url, body)).status_code == 200
                await slack.wait_until(lambda: any(m.edits and "svc verify: PASS" in m.edits[-1].text
                                                   for m in slack.messages_in("C0OPS") if not m.is_reply),
                                       timeout=30, what="the verdict on the parent")
                [parent] = [m for m in slack.messages_in("C0OPS") if not m.is_reply]
                await slack.wait_until(lambda: len(slack.thread("C0OPS", parent.ts)) >= 3, what="the replies")
                replies = {reply.text.split(":")[0]: reply.text for reply in slack.thread("C0OPS", parent.ts)}
                assert f"main PID {child} (child of docker-init, PID {init_pid}" in replies["main-pid"]
                assert replies["cmdline"].startswith("cmdline: pass") and "health" in replies
                assert slack.warnings == []
    finally:
        audit.close()


async def test_missing_flag_fails_cmdline(docker_lab: DockerLab, tmp_path: Path) -> None:
    await until("noflag up", lambda: docker_lab.inspect("noflag", "{{.State.Running}}") == "true")
    code, checks = await verify(docker_lab, "noflag", tmp_path)
    assert code == 1
    assert checks["cmdline"]["status"] == "fail" and f"missing {FLAG}" in checks["cmdline"]["summary"]


async def test_stopped_container_fails(docker_lab: DockerLab, tmp_path: Path) -> None:
    docker_lab.engine.docker("stop", "-t", "5", "stopme")
    code, checks = await verify(docker_lab, "stopme", tmp_path)
    assert code == 1
    assert checks["main-pid"]["status"] == "fail"
    assert "stopme is exited, exit code" in checks["main-pid"]["summary"]
    assert checks["health"]["status"] == "fail" and checks["cmdline"]["status"] == "error"


async def test_a_container_that_does_not_exist_fails(docker_lab: DockerLab, tmp_path: Path) -> None:
    code, checks = await verify(docker_lab, "ghost", tmp_path)
    assert code == 1
    assert checks["main-pid"]["status"] == "fail"
    assert "no container ghost on this host (the engine says: Error: No such container: ghost)" in \
        checks["main-pid"]["summary"]


async def test_crash_loop_fails_naming_restarting(docker_lab: DockerLab, tmp_path: Path) -> None:
    """Between two runs Docker reads `Running: true, Restarting: true, Pid: 0`: a fail that names it. A run
    caught in its 0.2 s of life is younger than min_uptime_s: a warning, never a pass."""
    await until("loop restarting", lambda: docker_lab.inspect("loop", "{{.State.Restarting}}") == "true",
                timeout_s=60, interval_s=0.1)
    seen: list[str] = []
    deadline = asyncio.get_running_loop().time() + 60
    while not seen or seen[-1] != "fail":
        assert asyncio.get_running_loop().time() < deadline, seen
        code, checks = await verify(docker_lab, "loop", tmp_path)
        main = checks["main-pid"]
        seen.append(main["status"])
        assert main["status"] in ("fail", "warn"), main
    assert code == 1
    assert "loop is in a crash loop: Restarting: true, Running: true, Pid: 0, last exit code 1" in main["summary"]


async def test_docker_restart_is_seen_by_pid_and_started_at_not_restart_count(docker_lab: DockerLab,
                                                                              tmp_path: Path) -> None:
    before = (await passing(docker_lab, "svc", tmp_path))["main-pid"]["details"]
    docker_lab.engine.docker("restart", "-t", "5", "svc")
    after = (await passing(docker_lab, "svc", tmp_path))["main-pid"]["details"]
    assert after["main_pid"] != before["main_pid"] and after["container_pid"] != before["container_pid"]
    assert after["started_at"] > before["started_at"]
    # moby#37596: the engine's own counter did not see it, so proofbot's evidence cannot have been it
    assert docker_lab.inspect("svc", "{{.RestartCount}}") == "0"


async def test_bridge_network_health_is_asked_at_the_containers_address(docker_lab: DockerLab,
                                                                        tmp_path: Path) -> None:
    """Nothing listens on the host's 127.0.0.1:30005: only the container's address from inspect answers."""
    checks = await passing(docker_lab, "bridged", tmp_path)
    address = docker_lab.inspect("bridged", f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}')
    assert address.startswith(f"10.231.{docker_lab.lab.octet}.")
    health = checks["health"]
    assert health["status"] == "pass", health
    assert f"(at the container's address: GET http://{address}:{PORTS['bridged']}/health" in health["summary"]
