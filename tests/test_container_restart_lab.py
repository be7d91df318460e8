"""Tier 2, real Docker 20.10 and docker-compose 1.29: `proofbot restart` of container services over real OpenSSH
to a namespace host where a private dockerd runs (tests/lab/docker.py). Each container is the lab's stand-in
server behind `--init`, started by `sh -c` that exits 3 while its flag file exists (a broken launch, set by the
test before the restart). One host, one engine, one container per case; a rolling restart over three inventory
hosts (three containers on that one lab host, the first on a bridge network: health at its address) halts at the
crash-looping one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

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
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.test_slack_restore import APPROVER, CHANNEL, SECRET, Rig

pytestmark = [pytest.mark.docker, pytest.mark.tier2, pytest.mark.timeout(600)]

IMAGE = "proofbot-lab:bookworm"
SCRIPT = "/srv/app/fake_llm.py"
FLAG = "--speculative-algorithm NEXTN"
COMPOSE = "/usr/bin/docker-compose"
PROJECT, SERVICE = "pblab", "web"
# name: (port, restart policy)
CONTAINERS = {"svc": (30011, "no"), "gone": (30012, "no"), "loop": (30013, "always"),
              "r1": (30021, "no"), "r2": (30022, "always"), "r3": (30023, "no")}
WEB_PORT = 30031
BRIDGE, BRIDGED = "pbnet", ("r1",)  # on a user-defined bridge: nothing listens on the host's 127.0.0.1:30021
MIN_UPTIME_S = 2
OTHER_GID = 1000  # a group that is not root's


def launch(port: int, listen: str = "127.0.0.1") -> list[str]:
    """The container's command: exit 3 while /flags/broken-PORT exists; the stand-in server, which answers
    health 503 for 600 s after it starts while /flags/slow-PORT exists."""
    server = f"exec python3 {SCRIPT} --host {listen} --port {port} {FLAG}"
    return ["sh", "-c", f"test ! -e /flags/broken-{port} || exit 3; "
            f"if test -e /flags/slow-{port}; then {server} --startup-delay 600; fi; {server}"]


@dataclass
class ContainerLab:
    lab: NetnsLab
    host: LabHost
    engine: Engine
    flags: Path
    compose_file: Path

    def service(self, **more: Any) -> dict[str, Any]:
        return {"engine": {"cli": DOCKER, "host": self.engine.socket, "compose": COMPOSE},
                "expect_flags": [FLAG], "min_uptime_s": MIN_UPTIME_S, "ready_timeout_s": 30, **more}

    def document(self) -> dict[str, Any]:
        document = self.lab.inventory()
        where = {"address": self.host.address, "port": self.host.port}
        document["hosts"] = {name: {**where, "service": self.service(
            manager="docker", container=name, health_url=f"http://127.0.0.1:{port}/health")}
            for name, (port, _) in CONTAINERS.items()}
        document["hosts"]["web"] = {**where, "service": self.service(
            manager="compose", project=PROJECT, service=SERVICE, compose_file=str(self.compose_file),
            health_url=f"http://127.0.0.1:{WEB_PORT}/health", min_uptime_s=3, ready_timeout_s=90)}
        document["groups"] = {"fleet": ["r1", "r2", "r3"]}
        document["fleet"] = {"restart_batch": 1}
        return document

    def inspect(self, name: str, template: str) -> str:
        return self.engine.docker("inspect", "--format", template, name).stdout.strip()

    def service_pid(self, name: str) -> int:
        """The init's one child, read from /proc here: the PID proofbot must name."""
        init = int(self.inspect(name, "{{.State.Pid}}"))
        [child] = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        return int(child)

    def compose_ids(self) -> list[str]:
        return self.engine.docker("ps", "-aq", "--no-trunc", "--filter", f"label=com.docker.compose.project={PROJECT}",
                                  "--filter", f"label=com.docker.compose.service={SERVICE}").stdout.split()

    async def compose(self, *args: str) -> str:
        """docker-compose 1.29 itself on the project; its stdout."""
        child = await asyncio.create_subprocess_exec(
            COMPOSE, "-H", self.engine.socket, "-f", str(self.compose_file), "-p", PROJECT, *args,
            env=self.engine.env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(120):
            out, err = await child.communicate()
        assert child.returncode == 0, err.decode()[-2000:]
        return out.decode()


def _compose_file(path: Path, flags: Path) -> None:
    path.write_text(json.dumps({"version": "2.4", "services": {SERVICE: {
        "image": IMAGE, "init": True, "network_mode": "host", "command": launch(WEB_PORT),
        "volumes": [f"{FAKE_LLM}:{SCRIPT}:ro", f"{flags}:/flags:ro"]}}}, indent=1))


@pytest.fixture(scope="module")
def ctlab() -> Iterator[ContainerLab]:
    reason = require_docker("container restart lab")
    if reason:
        skip_or_fail(reason)
    rootfs, _ = ensure_image()
    with running_lab(NetnsLab, {"ct140": Scenario()}) as lab:
        host = lab.hosts["ct140"]
        engine = start_engine(netns=host.netns)
        try:
            engine.import_rootfs(rootfs, IMAGE)
            # Under the engine's root (/var/tmp): seen by dockerd and by the lab host's docker-compose alike
            flags, project = engine.root / "flags", engine.root / "project"
            flags.mkdir()
            project.mkdir()
            _compose_file(project / "docker-compose.yml", flags)
            # The lab's own /24 (claimed for this run), its top /27: a bridge in the lab host's namespace only
            engine.docker("network", "create", "--driver", "bridge", "--subnet", f"10.231.{lab.octet}.192/27",
                          BRIDGE)
            for name, (port, policy) in CONTAINERS.items():
                network, listen = (BRIDGE, "0.0.0.0") if name in BRIDGED else ("host", "127.0.0.1")
                engine.docker("run", "-d", "--name", name, "--init", "--network", network, f"--restart={policy}",
                              "-v", f"{FAKE_LLM}:{SCRIPT}:ro", "-v", f"{flags}:/flags:ro", IMAGE,
                              *launch(port, listen))
            made = ContainerLab(lab, host, engine, flags, project / "docker-compose.yml")
            asyncio.run(made.compose("up", "-d"))
            yield made
        finally:
            # every container killed first (a crash-looping one would hold dockerd's own stop up)
            left = engine.docker("ps", "--all", "--quiet", check=False).stdout.split()
            if left:
                engine.docker("rm", "--force", *left, check=False)
            stop_engine(engine)


async def restart(ctlab: ContainerLab, target: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    inventory = write_inventory(tmp_path / "inventory.yml", ctlab.document())
    run = await run_cli("restart", target, "--yes", "--json", "--inventory", str(inventory),
                        "--db", str(tmp_path / "a.db"))
    assert run.stdout.strip(), run.stderr
    return run.code, json.loads(run.stdout)


async def until(what: str, probe: Callable[[], Awaitable[bool]], timeout_s: float, interval_s: float = 0.3) -> None:
    """Poll an async probe (a docker call that must not block the loop) until it holds; fail naming it after
    timeout_s (tests/lab/waits.py's rule, for awaitable probes)."""
    deadline = time.monotonic() + timeout_s
    while not await probe():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        await asyncio.sleep(interval_s)


def checks(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in result["checks"]}


async def up(ctlab: ContainerLab, name: str) -> None:
    """Up longer than min_uptime_s: a restart planned now starts from a settled run."""
    async def settled() -> bool:
        code, out, _ = await ctlab.engine.docker_async("inspect", "--format", "{{.State.Running}} "
                                                       "{{.State.Restarting}} {{.State.StartedAt}}", name)
        return code == 0 and out.startswith("true false")
    await until(f"{name} running", settled, timeout_s=60)


async def test_docker_restart_is_proven_by_a_new_started_at_and_pid(ctlab: ContainerLab, tmp_path: Path) -> None:
    await up(ctlab, "svc")
    started, old = ctlab.inspect("svc", "{{.State.StartedAt}}"), ctlab.service_pid("svc")
    code, result = await restart(ctlab, "svc", tmp_path)
    assert code == 0, result
    found = checks(result)
    assert {name: check["status"] for name, check in found.items()} == {
        "restart-command": "pass", "main-pid": "pass", "health": "pass", "cmdline": "pass", "ready-time": "pass"}
    new = ctlab.service_pid("svc")
    assert (result["old_pid"], result["new_pid"]) == (old, new) and new != old
    main = found["main-pid"]
    assert main["summary"].startswith(f"new run: StartedAt {started[:19]}")
    assert f"PID {old} → StartedAt {ctlab.inspect('svc', '{{.State.StartedAt}}')[:19]}" in main["summary"]
    assert f"PID {new}; up " in main["summary"]
    uptime = re.search(rf"up ([0-9.]+) s \(min_uptime_s {MIN_UPTIME_S}\), Running and not Restarting in every poll",
                       main["summary"])
    assert uptime is not None and float(uptime.group(1)) >= MIN_UPTIME_S, main["summary"]  # held, by the engine
    assert found["restart-command"]["evidence"]["command"] == f"{DOCKER} -H {ctlab.engine.socket} restart svc"
    # moby#37596: the engine's own counter never saw it, so the proof cannot have been it
    assert ctlab.inspect("svc", "{{.RestartCount}}") == "0"


async def test_a_slack_restart_of_a_container_is_approved_by_click_and_proven_in_the_thread(
        ctlab: ContainerLab, tmp_path: Path) -> None:
    """/restart through the real bolt app (the fake Slack Web API only): the plan shows the container's PID, an
    approver's click restarts it, and the thread shows the proof: the new StartedAt and the new PID."""
    await up(ctlab, "svc")
    old = ctlab.service_pid("svc")
    document = ctlab.document()
    document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False, "expire_after_s": 900}
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        context = BotContext(parse_inventory(yaml.safe_dump(document), "inventory.yml"), audit)
        app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
        try:
            async with serving(app) as url:
                rig = Rig(slack, url, tmp_path / "audit.db", cast(Any, None))  # no demo host: the lab's
                assert (await rig.command("/restart", "svc")).status_code == 200
                plan = await rig.restore_plan_message()
                shown = json.dumps(plan.blocks)
                assert f"PID {old}" in shown and "restart svc" in shown, shown
                response, _ = await rig.click(plan, "restart_approve", APPROVER)
                assert response.status_code == 200
                await slack.wait_until(lambda: "restart: " in slack.message(CHANNEL, plan.ts).text, timeout=90,
                                       what="the restart verdict")
                parent = slack.message(CHANNEL, plan.ts)
                assert "restart: PASS" in parent.text, parent.text
                new, started = ctlab.service_pid("svc"), ctlab.inspect("svc", "{{.State.StartedAt}}")
                assert new != old
                await slack.wait_until(lambda: any(m.text.startswith("Summary of operation")  # evidence: after
                                                   for m in slack.thread(CHANNEL, plan.ts)), what="the summary")
                replies = [reply.text for reply in slack.thread(CHANNEL, plan.ts)]
                proof = [text for text in replies if f"PID {old} → StartedAt {started[:19]}" in text]
                assert proof and f"PID {new}; up " in proof[0], replies
                assert slack.warnings == []
        finally:
            for timer in list(context.timers):
                timer.cancel()
            audit.close()


async def test_a_container_that_never_came_back_is_not_proven(ctlab: ContainerLab, tmp_path: Path) -> None:
    await up(ctlab, "gone")
    (ctlab.flags / f"broken-{CONTAINERS['gone'][0]}").touch()
    code, result = await restart(ctlab, "gone", tmp_path)
    assert code == 1 and result["verdict"] == "fail"
    found = checks(result)
    assert found["restart-command"]["status"] == "pass"  # docker restart said 0: it started, then exited
    main = found["main-pid"]
    assert main["status"] == "fail" and "was seen exited, exit code 3" in main["summary"]
    assert main["summary"].endswith("its engine does not restart it: it never came back")
    assert found["ready-time"]["status"] == "fail" and found["health"]["status"] == "fail"
    assert ctlab.inspect("gone", "{{.State.Status}} {{.State.ExitCode}}") == "exited 3"


async def test_a_crash_loop_is_named_with_its_exit_codes_never_restarted(ctlab: ContainerLab,
                                                                         tmp_path: Path) -> None:
    await up(ctlab, "loop")
    (ctlab.flags / f"broken-{CONTAINERS['loop'][0]}").touch()
    code, result = await restart(ctlab, "loop", tmp_path)
    assert code == 1 and result["verdict"] == "fail"
    found = checks(result)
    main = found["main-pid"]
    assert main["status"] == "fail" and main["summary"].startswith("loop is in a crash loop: ")
    assert "exit codes seen: 3" in main["summary"] and set(main["details"]["exit_codes"]) == {3}
    assert found["ready-time"]["status"] == "fail" and "crash loop" in found["ready-time"]["summary"]


async def test_a_compose_restart_follows_a_recreate_by_the_labels(ctlab: ContainerLab, tmp_path: Path) -> None:
    """`up --force-recreate` lands while proofbot proves its `docker-compose restart`: the new container, found by
    its labels, is the one proven, and the recreate is reported. The restarted run answers 503 (its slow flag), so
    the proof cannot end before the recreate, however long compose takes."""
    [first] = ctlab.compose_ids()
    await up(ctlab, first)
    # verify: docker's checks on the container the labels found (young: warns until min_uptime_s, then passes)
    inventory = write_inventory(tmp_path / "inventory.yml", ctlab.document())
    seen: list[dict[str, Any]] = []

    async def verified() -> bool:
        run = await run_cli("verify", "web", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "v.db"))
        seen.append(json.loads(run.stdout))
        return run.code == 0
    await until("verify web passes", verified, timeout_s=60)
    verify_main = checks(seen[-1])["main-pid"]
    assert verify_main["summary"].endswith(f"(container {first[:12]})") and verify_main["status"] == "pass"
    assert verify_main["details"]["main_pid"] == ctlab.service_pid(first)
    assert {check["name"] for check in seen[-1]["checks"]} == {"main-pid", "health", "cmdline"}
    started = ctlab.inspect(first, "{{.State.StartedAt}}")
    slow = ctlab.flags / f"slow-{WEB_PORT}"
    slow.touch()
    task = asyncio.create_task(restart(ctlab, "web", tmp_path))

    async def restarted() -> bool:
        code, out, _ = await ctlab.engine.docker_async("inspect", "--format", "{{.State.StartedAt}}", first)
        return code == 0 and out.strip() != started
    await until("proofbot's compose restart", restarted, timeout_s=60, interval_s=0.1)
    slow.unlink()
    await ctlab.compose("up", "-d", "--force-recreate")
    code, result = await task
    [second] = ctlab.compose_ids()
    assert second != first
    # the container the labels found is the one docker-compose itself calls the service's
    assert (await ctlab.compose("ps", "-q", SERVICE)).split() == [second]
    assert code == 0, result
    found = checks(result)
    main = found["main-pid"]
    assert main["status"] == "pass"
    assert main["summary"].endswith(f"container recreated: {first[:12]} → {second[:12]} (followed by its labels)")
    assert main["details"]["recreated"] == [first, second] and main["details"]["container_ids"][-1] == second
    assert result["new_pid"] == ctlab.service_pid(second)
    assert found["restart-command"]["evidence"]["command"] == (
        f"{COMPOSE} -H {ctlab.engine.socket} -f {ctlab.compose_file} -p {PROJECT} restart {SERVICE}")


async def test_a_group_writable_compose_file_is_refused_and_nothing_runs(ctlab: ContainerLab, tmp_path: Path) -> None:
    """docker-compose reads the compose file as root: one another group can write is refused at restart time, with
    its path, owner and mode, and docker-compose never runs (the container's StartedAt stays)."""
    [current] = ctlab.compose_ids()
    await up(ctlab, current)
    started = ctlab.inspect(current, "{{.State.StartedAt}}")
    stat = ctlab.compose_file.stat()
    os.chown(ctlab.compose_file, 0, OTHER_GID)
    ctlab.compose_file.chmod(0o664)
    try:
        inventory = write_inventory(tmp_path / "inventory.yml", ctlab.document())
        run = await run_cli("restart", "web", "--yes", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    finally:
        os.chown(ctlab.compose_file, stat.st_uid, stat.st_gid)
        ctlab.compose_file.chmod(stat.st_mode & 0o7777)
    assert run.code == 4, run
    assert (f"not restarting {PROJECT}/{SERVICE}: {ctlab.compose_file} is writable by group gid {OTHER_GID} "
            f"(owner uid 0, group gid {OTHER_GID}, mode 664): nothing run") in run.stderr, run
    assert ctlab.compose_ids() == [current] and ctlab.inspect(current, "{{.State.StartedAt}}") == started


def _compose_with_its_interpreter_in(where: Path, owner: int) -> tuple[Path, Path]:
    """A copy of docker-compose beside WHERE whose `#!` is a link to python3 in WHERE, a dir OWNER owns."""
    interpreter = where / "python3"
    where.mkdir()
    interpreter.symlink_to("/usr/bin/python3")
    os.chown(where, owner, owner)
    compose = where.parent / "docker-compose"
    compose.write_text(Path(COMPOSE).read_text().replace("#!/usr/bin/python3", f"#!{interpreter}", 1))
    compose.chmod(0o755)
    return compose, interpreter


async def test_a_docker_compose_whose_interpreter_another_user_can_change_is_refused(ctlab: ContainerLab,
                                                                                    tmp_path: Path) -> None:
    """docker-compose 1.29 is a Python script: a copy whose `#!` interpreter is a link in a dir another user owns
    (who could point it at their own program) is refused naming that dir, and nothing runs."""
    [current] = ctlab.compose_ids()
    await up(ctlab, current)
    started = ctlab.inspect(current, "{{.State.StartedAt}}")
    planted = Path(tempfile.mkdtemp(prefix="pb-compose-", dir="/var/tmp"))  # root's, seen by the lab host
    try:
        compose, interpreter = _compose_with_its_interpreter_in(planted / "py", owner=OTHER_GID)
        document = ctlab.document()
        document["hosts"]["web"]["service"]["engine"]["compose"] = str(compose)
        inventory = write_inventory(tmp_path / "inventory.yml", document)
        run = await run_cli("restart", "web", "--yes", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    finally:
        shutil.rmtree(planted)
    assert run.code == 4, run
    assert (f"not restarting {PROJECT}/{SERVICE}: {interpreter.parent} is writable by its owner uid {OTHER_GID} "
            f"(owner uid {OTHER_GID}, group gid {OTHER_GID}, mode 755): nothing run") in run.stderr, run
    assert ctlab.compose_ids() == [current] and ctlab.inspect(current, "{{.State.StartedAt}}") == started


async def test_an_engine_socket_another_user_owns_is_refused_and_nothing_runs(ctlab: ContainerLab,
                                                                              tmp_path: Path) -> None:
    """The daemon's socket, owned by another user (who could have planted it and answer inspect with a made-up PID
    and StartedAt): restart is refused naming it, with its owner and mode, docker never runs (StartedAt stays), the
    audit says why; verify's main-pid is an error saying the same (tests/test_owner_guard.py: each case)."""
    await up(ctlab, "svc")
    started = ctlab.inspect("svc", "{{.State.StartedAt}}")
    sock = ctlab.engine.socket.removeprefix("unix://")
    stat = os.stat(sock)
    os.chown(sock, OTHER_GID, stat.st_gid)
    try:
        inventory = write_inventory(tmp_path / "inventory.yml", ctlab.document())
        run = await run_cli("restart", "svc", "--yes", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
        verify = await run_cli("verify", "svc", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "v.db"))
    finally:
        os.chown(sock, stat.st_uid, stat.st_gid)
    why = (f"engine socket {sock} refused, nothing run: {sock} is writable by its owner uid {OTHER_GID} (owner uid "
           f"{OTHER_GID}, group gid {stat.st_gid}, mode {stat.st_mode & 0o7777:o})")
    assert run.code == 4 and f"not restarting svc: {why}" in run.stderr, run
    assert ctlab.inspect("svc", "{{.State.StartedAt}}") == started
    with contextlib.closing(sqlite3.connect(tmp_path / "a.db")) as db:
        events = db.execute("SELECT kind, details FROM events ORDER BY id").fetchall()
    assert any(why in details for _, details in events), events
    [main] = [check for check in json.loads(verify.stdout)["checks"] if check["name"] == "main-pid"]
    assert main["status"] == "error" and why in main["summary"], main


async def test_rolling_restart_over_three_container_hosts_halts_at_the_crash_looping_one(
        ctlab: ContainerLab, tmp_path: Path) -> None:
    for name in ("r1", "r2", "r3"):
        await up(ctlab, name)
    before = {name: ctlab.service_pid(name) for name in ("r1", "r2", "r3")}
    (ctlab.flags / f"broken-{CONTAINERS['r2'][0]}").touch()
    code, result = await restart(ctlab, "fleet", tmp_path)
    assert code == 1, result
    assert (result["done"], result["failed"], result["untouched"]) == (["r1"], ["r2"], ["r3"])
    assert "halted after batch 2 of 3: r2 failed its proof" in result["halted"]
    by_host = {host["host"]: host for host in result["hosts"]}
    assert by_host["r1"]["new_pid"] == ctlab.service_pid("r1") != before["r1"]
    # r1 is on a bridge: health was asked at the container's address from the polls' inspect
    address = ctlab.inspect("r1", f'{{{{(index .NetworkSettings.Networks "{BRIDGE}").IPAddress}}}}')
    health = checks(by_host["r1"])["health"]
    assert health["status"] == "pass" and f"http://{address}:{CONTAINERS['r1'][0]}/health" in \
        health["evidence"]["command"], health
    looping = checks(by_host["r2"])["main-pid"]
    assert looping["status"] == "fail" and looping["summary"].startswith("r2 is in a crash loop: ")
    assert ctlab.service_pid("r3") == before["r3"]  # never restarted
