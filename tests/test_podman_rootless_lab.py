"""Tier 2, real rootless Podman 4.3 (runc, newuidmap/newgidmap): in a namespace host whose own /etc/passwd, /etc/group,
/etc/subuid and /etc/subgid (bind mounts in that host's mount namespace only) know a user `pbrl` (uid 1500, subuids
200000-265535), that user runs a container, and proofbot logs in over real OpenSSH AS that user: verify (main-pid
with Podman's catatonit as the init and the service its child, cmdline, StartedAt, health) and a restart proven by a
new StartedAt and PID, with no root anywhere on the engine's side.

The container's root is a skeleton directory the user owns, with the machine's /usr bound read-only: the lab's
bookworm rootfs belongs to root, which a rootless user namespace cannot map (runc cannot mount its /etc/hosts nor
catatonit on its /run: "permission denied")."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_inventory
from tests.lab import skip_or_fail
from tests.lab.common import FAKE_LLM, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.net import ssh_banner
from tests.lab.netns import NetnsHost, NetnsLab
from tests.lab.podman import _cgroup_mounts, require_podman
from tests.lab.sysutil import CLEAN_ENV

pytestmark = [pytest.mark.podman, pytest.mark.tier2, pytest.mark.timeout(300)]

USER, UID = "pbrl", 1500
SUBIDS = "200000:65536"
HOME = "/srv/pbrl"  # the lab host's /srv: its own directory on the machine
ROOTFS = f"{HOME}/rootfs"
SCRIPT = "/srv/app/fake_llm.py"
FLAG = "--speculative-algorithm NEXTN"
PORT = 30041
NAME = "rl"


@dataclass
class RootlessLab:
    lab: NetnsLab
    host: NetnsHost

    def podman(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """podman as the user, inside the lab host, with the environment an SSH session gives it."""
        argv = ["nsenter", "-t", str(self.host.pid), "-n", "-m", "--", "setpriv", f"--reuid={UID}",
                f"--regid={UID}", "--clear-groups", "env", "-i", f"HOME={HOME}", f"USER={USER}", f"LOGNAME={USER}",
                "PATH=/usr/bin:/bin", "podman", *args]
        run = subprocess.run(argv, env=CLEAN_ENV, capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert not check or run.returncode == 0, f"podman {shlex.join(args)}: {run.stderr[-2000:]}"
        return run

    def inspect(self, template: str) -> str:
        return self.podman("inspect", "--format", template, NAME).stdout.strip()

    def service_pid(self) -> int:
        init = int(self.inspect("{{.State.Pid}}"))
        [child] = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        return int(child)

    def document(self) -> dict[str, Any]:
        document = self.lab.inventory()
        document["ssh"]["user"] = USER
        document["hosts"] = {self.host.name: {"address": self.host.address, "port": self.host.port}}
        document["hosts"][self.host.name]["service"] = {
            "manager": "podman", "container": NAME, "health_url": f"http://127.0.0.1:{PORT}/health",
            "expect_flags": [FLAG], "min_uptime_s": 1, "ready_timeout_s": 30}
        return document


def _user_files(host: NetnsHost) -> None:
    """The user in the lab host only: its passwd/group/subuid/subgid bound over the host's own, its key for sshd
    (a Match block: sshd reads authorized_keys as the user, who cannot read /root), its home and the rootfs."""
    etc = host.local_path(f"{HOME}-etc")
    etc.mkdir(parents=True)
    (etc / "passwd").write_text(Path("/etc/passwd").read_text() + f"{USER}:x:{UID}:{UID}::{HOME}:/bin/sh\n")
    (etc / "group").write_text(Path("/etc/group").read_text() + f"{USER}:x:{UID}:\n")
    (etc / "subuid").write_text(f"{USER}:{SUBIDS}\n")
    (etc / "subgid").write_text(f"{USER}:{SUBIDS}\n")
    for name in ("passwd", "group", "subuid", "subgid"):
        host.run(["mount", "--bind", f"{HOME}-etc/{name}", f"/etc/{name}"])
    ssh = host.local_path("/etc/ssh")
    (ssh / f"authorized_keys.{USER}").write_text(host.local_path("/root/.ssh/authorized_keys").read_text())
    with open(ssh / "sshd_config", "a") as config:
        config.write(f"Match User {USER}\n    AuthorizedKeysFile /etc/ssh/authorized_keys.{USER}\n")
    home = host.local_path(HOME)
    conf = home / ".config" / "containers"
    conf.mkdir(parents=True)
    # runc (crun 1.8 refuses these machines' hybrid cgroups); storage and run state in the user's home
    (conf / "containers.conf").write_text('[engine]\nruntime = "runc"\n')
    (conf / "storage.conf").write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{HOME}/storage"\n'
                                       f'runroot = "{HOME}/run"\n')
    rootfs = host.local_path(ROOTFS)
    for sub in ("etc", "run", "tmp", "proc", "dev", "sys", "usr", "srv/app"):
        (rootfs / sub).mkdir(parents=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        (rootfs / link).symlink_to(f"usr/{link}")
    # A copy in the user's own rootfs, not a bind of the repository's file: the lab host has a private /tmp (a
    # clone under /tmp, as CI's may be, is not there), and the user must be able to reach it in any case.
    shutil.copyfile(FAKE_LLM, rootfs / SCRIPT.lstrip("/"))
    for path in [home, *home.rglob("*")]:
        os.chown(path, UID, UID, follow_symlinks=False)
    home.chmod(0o755)


@pytest.fixture(scope="module")
def rootless() -> Iterator[RootlessLab]:
    reason = require_podman("rootless podman lab")
    if reason:
        skip_or_fail(reason)
    with running_lab(NetnsLab, {"ct150": Scenario()}) as lab:
        host = lab.hosts["ct150"]
        assert isinstance(host, NetnsHost)
        _user_files(host)
        cgroups = host.run(["sh", "-c", _cgroup_mounts()], check=False)  # `ip netns exec` hid them
        assert cgroups.returncode == 0, f"could not mount the cgroup hierarchies in {host.name}: {cgroups.stderr}"
        host.run(["supervisorctl", "-c", "/etc/supervisor/supervisord.conf", "restart", "sshd"])
        deadline = time.monotonic() + 30
        while not ssh_banner(host.address, host.port).startswith(b"SSH-"):
            assert time.monotonic() < deadline, "the lab host's sshd did not come back within 30 s"
            time.sleep(0.1)
        made = RootlessLab(lab, host)
        try:
            server = f"exec python3 {SCRIPT} --host 127.0.0.1 --port {PORT} {FLAG}"
            made.podman("run", "-d", "--name", NAME, "--init", "--network", "host", "-v", "/usr:/usr:ro",
                        "--rootfs", ROOTFS, "sh", "-c", server)
            yield made
        finally:
            made.podman("rm", "--force", "--all", check=False)
            pause = host.local_path(f"{HOME}/run/libpod/tmp/pause.pid")
            if not pause.exists():
                pause = host.local_path(f"/tmp/podman-run-{UID}/libpod/tmp/pause.pid")
            if pause.exists() and (pid := pause.read_text().strip()).isdigit():
                subprocess.run(["kill", "-9", pid], check=False)  # the user namespace's holder, started by us


async def until(what: str, probe: Callable[[], Awaitable[bool]], timeout_s: float, interval_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while not await probe():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        await asyncio.sleep(interval_s)


def checks(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in result["checks"]}


async def verify(rootless: RootlessLab, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    inventory = write_inventory(tmp_path / "inventory.yml", rootless.document())
    run = await run_cli("verify", "ct150", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "v.db"))
    assert run.stdout.strip(), run.stderr
    return run.code, json.loads(run.stdout)


async def test_verify_as_the_rootless_user_proves_pid_cmdline_started_at_and_health(rootless: RootlessLab,
                                                                                    tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def passes() -> bool:
        code, result = await verify(rootless, tmp_path)
        seen.append(result)
        # a run younger than min_uptime_s only warns (its verdict is already pass): wait for the main PID's pass
        return code == 0 and result["verdict"] == "pass" and checks(result).get("main-pid", {}).get("status") == "pass"
    try:
        await until("verify as pbrl passes", passes, timeout_s=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last verify: {json.dumps(seen[-1:])[:4000]}") from None
    found = checks(seen[-1])
    assert {name: check["status"] for name, check in found.items()} == {
        "main-pid": "pass", "health": "pass", "cmdline": "pass"}, found
    main = found["main-pid"]
    init = int(rootless.inspect("{{.State.Pid}}"))
    assert main["details"]["main_pid"] == rootless.service_pid() and main["details"]["container_pid"] == init
    assert f"(child of podman-init, PID {init}: the container's PID 1)" in main["summary"]
    assert main["details"]["started_at"].startswith(rootless.inspect("{{.State.StartedAt}}")[:19].replace(" ", "T"))
    assert main["evidence"]["command"].startswith("podman inspect --type container")
    # rootless: the container's processes run as the user's own uid on the host, never root's
    assert os.stat(f"/proc/{rootless.service_pid()}").st_uid == UID


async def test_a_rootless_restart_is_proven_by_a_new_started_at_and_pid(rootless: RootlessLab, tmp_path: Path) -> None:
    async def running() -> bool:
        return rootless.inspect("{{.State.Running}}") == "true"
    await until("the container running", running, timeout_s=60)
    started, old = rootless.inspect("{{.State.StartedAt}}"), rootless.service_pid()
    inventory = write_inventory(tmp_path / "inventory.yml", rootless.document())
    run = await run_cli("restart", "ct150", "--yes", "--json", "--inventory", str(inventory),
                        "--db", str(tmp_path / "a.db"))
    assert run.code == 0, run
    result = json.loads(run.stdout)
    new = rootless.service_pid()
    assert (result["old_pid"], result["new_pid"]) == (old, new) and new != old
    assert rootless.inspect("{{.State.StartedAt}}") != started
    found = checks(result)
    assert found["restart-command"]["evidence"]["command"] == f"podman restart {NAME}"
    assert found["main-pid"]["status"] == "pass" and f"PID {new}; up " in found["main-pid"]["summary"]
