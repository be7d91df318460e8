"""The Docker image, built and run by a real Docker engine: a private dockerd, the base imported from the
lab's bookworm rootfs (no registry), then `--version`, `serve --check`, `verify` of a tier-2 host and
`serve` against the fake Slack, all inside the image. Root only; under CI a missing engine fails."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.lab import UNAVAILABLE_ENV, skip_or_fail
from tests.lab.common import Scenario
from tests.lab.docker import DOCKER, Engine, require_docker, start_engine, stop_engine
from tests.lab.fixtures import running_lab
from tests.lab.image import ensure_image
from tests.lab.netns import NetnsLab
from tests.serve_rig import free_port
from tests.slack_fake import FakeSlack
from tests.slack_fake.signing import slash_command_body

# The whole module needs root, a network namespace host and the engine; one build serves every test.
pytestmark = [pytest.mark.docker, pytest.mark.tier2, pytest.mark.timeout(900)]

UID = 10001  # the image's proofbot user
TAG = "proofbot:test"
BASE_TAG = "proofbot-base:bookworm"
CHANNEL = "C0OPS"


@dataclass
class Built:
    engine: Engine
    base_id: str
    build_s: float


@pytest.fixture(scope="module")
def built() -> Iterator[Built]:
    reason = require_docker()
    if reason:
        skip_or_fail(reason)
    rootfs, _ = ensure_image()
    engine = start_engine()
    try:
        started = time.monotonic()
        # What docs/docker.md tells a user to run, against this run's daemon and pip cache.
        build = subprocess.run(
            [str(REPO / "scripts/image"), TAG], cwd=REPO, capture_output=True, text=True, timeout=800,
            env={**os.environ, **engine.env, "DOCKER": DOCKER, "PYTHON": sys.executable, "ROOTFS": str(rootfs),
                 "BASE_TAG": BASE_TAG, "PIP_CACHE_DIR": str(engine.root / "pip-cache")})
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
        base_id = engine.docker("image", "inspect", "-f", "{{.Id}}", BASE_TAG).stdout.strip()
        yield Built(engine, base_id, time.monotonic() - started)
    finally:
        stop_engine(engine)


def inspect(engine: Engine, ref: str) -> dict[str, object]:
    [info] = json.loads(engine.docker("image", "inspect", ref).stdout)
    assert isinstance(info, dict)
    return info


def run_image(engine: Engine, *args: str, entrypoint: str = "proofbot", mounts: Sequence[str] = (),
              network: str = "none") -> subprocess.CompletedProcess[str]:
    volumes = [flag for mount in mounts for flag in ("-v", mount)]
    return engine.docker("run", "--rm", "--network", network, *volumes, "--entrypoint", entrypoint, TAG, *args,
                         check=False)


def test_the_image_runs_proofbot_as_uid_10001(built: Built) -> None:
    version = run_image(built.engine, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"proofbot {importlib.metadata.version('proofbot')}"
    assert run_image(built.engine, "-u", entrypoint="id").stdout.strip() == str(UID)
    config = inspect(built.engine, TAG)["Config"]
    assert isinstance(config, dict)
    assert config["Entrypoint"] == ["proofbot", "serve"]
    assert config["Healthcheck"]["Test"] == ["CMD", "proofbot", "serve", "--check"]


def test_the_image_is_built_on_the_imported_rootfs_it_records(built: Built) -> None:
    """The pin: the base's image ID goes in as BASE, is recorded in a label, and the image's first layer is
    the base's only layer (the rootfs tar), so nothing else was pulled underneath."""
    image, base = inspect(built.engine, TAG), inspect(built.engine, built.base_id)
    assert image["Config"]["Labels"]["org.proofbot.base"] == built.base_id  # type: ignore[index]
    assert base["RootFS"]["Layers"] == image["RootFS"]["Layers"][:1]  # type: ignore[index]


def _lock_pins() -> set[str]:
    text = (REPO / "requirements.lock").read_text().replace("\\\n", " ")
    return {line.split()[0].lower().replace("_", "-") for line in text.splitlines()
            if line and not line.startswith("#")}


def test_the_image_holds_exactly_the_locked_dependencies(built: Built) -> None:
    freeze = run_image(built.engine, "-m", "pip", "freeze", "--all", "--exclude", "proofbot", entrypoint="python")
    assert freeze.returncode == 0, freeze.stderr
    installed = {line.lower().replace("_", "-") for line in freeze.stdout.split()}
    assert installed == _lock_pins()


def test_the_build_context_is_only_the_lock_and_the_wheels(built: Built) -> None:
    """.dockerignore: .venv, .lab-cache (the rootfs), .git and the source tree never reach the daemon."""
    probe = f"FROM {built.base_id}\nCOPY . /context\n"
    built.engine.docker("build", "--network", "none", "-q", "-t", "proofbot-context:test", "-f", "-", str(REPO),
                        stdin=probe.encode(), timeout=300)
    try:
        listing = built.engine.docker("run", "--rm", "--network", "none", "proofbot-context:test",
                                      "find", "/context", "-type", "f").stdout.split()
    finally:
        built.engine.docker("rmi", "proofbot-context:test", check=False)
    sent = {path.removeprefix("/context/") for path in listing}
    assert "requirements.lock" in sent
    strays = {path for path in sent if path != "requirements.lock" and not (
        path.startswith(("build/docker/deps/", "build/docker/app/")) and path.endswith(".whl"))}
    assert strays == set()
    assert any(path.startswith("build/docker/app/proofbot-") for path in sent)


def _mounts(tmp_path: Path, inventory: dict[str, object], key: Path, known_hosts: Path) -> list[str]:
    """The layout docs/docker.md gives: key and known_hosts read-only in ~proofbot/.ssh, owned by 10001."""
    keys = tmp_path / "keys"
    keys.mkdir()
    shutil.copy(key, keys / "id_ed25519")
    shutil.copy(known_hosts, keys / "known_hosts")
    for path, mode in ((keys / "id_ed25519", 0o400), (keys / "known_hosts", 0o644)):
        os.chown(path, UID, UID)
        os.chmod(path, mode)
    audit = tmp_path / "audit"
    audit.mkdir()
    os.chown(audit, UID, UID)
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    return [f"{tmp_path / 'inventory.yml'}:/etc/proofbot/inventory.yml:ro",
            f"{keys / 'id_ed25519'}:/home/proofbot/.ssh/id_ed25519:ro",
            f"{keys / 'known_hosts'}:/home/proofbot/.ssh/known_hosts:ro", f"{audit}:/var/lib/proofbot"]


def _container_inventory(lab: NetnsLab) -> dict[str, object]:
    document = lab.inventory()
    document["ssh"].update(known_hosts="/home/proofbot/.ssh/known_hosts",  # type: ignore[attr-defined]
                           client_keys=["/home/proofbot/.ssh/id_ed25519"])
    return document


@pytest.fixture(scope="module")
def lab(built: Built) -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct129": Scenario(patched=True), "ct130": Scenario()}) as lab:
        yield lab


def test_verify_in_the_image_reaches_a_namespace_host_with_the_mounted_key(
        built: Built, lab: NetnsLab, tmp_path: Path) -> None:
    """--network host: the container shares the root namespace, which reaches the host's 10.231.x address
    over the lab's veth; the key and known_hosts are the mounted files, read by UID 10001."""
    mounts = _mounts(tmp_path, _container_inventory(lab), lab.client_key, lab.known_hosts)
    clean = run_image(built.engine, "verify", "ct130", "--json", mounts=mounts, network="host")
    assert clean.returncode == 0, clean.stderr
    checks = {c["name"]: c["status"] for c in json.loads(clean.stdout)["checks"]}
    assert checks and set(checks.values()) == {"pass"}, checks
    patched = run_image(built.engine, "verify", "ct129", "--json", mounts=mounts, network="host")
    assert patched.returncode == 1, patched.stderr
    assert {c["name"]: c["status"] for c in json.loads(patched.stdout)["checks"]}["file:spec_info.py"] == "fail"


def test_verify_in_the_image_refuses_a_host_key_it_was_not_given(built: Built, lab: NetnsLab, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger_known_hosts"
    stranger.write_text(f"{lab['ct130'].address} {lab['ct129'].host_key_pub}\n")
    mounts = _mounts(tmp_path, _container_inventory(lab), lab.client_key, stranger)
    refused = run_image(built.engine, "verify", "ct130", "--json", mounts=mounts, network="host")
    assert refused.returncode == 3, refused.stdout + refused.stderr


async def test_serve_in_the_image_answers_slack_and_is_healthy(built: Built, lab: NetnsLab, tmp_path: Path) -> None:
    engine = built.engine
    mounts = _mounts(tmp_path, {**_container_inventory(lab), "channels": [CHANNEL]}, lab.client_key, lab.known_hosts)
    volumes = [flag for mount in mounts for flag in ("-v", mount)]
    idle = run_image(engine, "serve", "--check", mounts=mounts)
    assert idle.returncode == 1, "serve --check passed with no serve running"
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        port = await free_port()
        code, out, err = await engine.docker_async(
            "run", "-d", "--network", "host", "--health-interval", "1s", "--health-start-period", "0s",
            "-e", f"SLACK_BOT_TOKEN={slack.bot_token}", "-e", f"SLACK_SIGNING_SECRET={slack.signing_secret}",
            "-e", f"PROOFBOT_SLACK_API_URL={slack.api_url}", *volumes, TAG,
            "--http", str(port), "--host", "127.0.0.1")
        assert code == 0, err
        container = out.strip()
        try:
            async def health() -> str:
                return (await engine.docker_async("inspect", "-f", "{{.State.Health.Status}}", container))[1].strip()

            status = ""
            deadline = time.monotonic() + 90
            while status != "healthy" and time.monotonic() < deadline:
                status = await health()
                await asyncio.sleep(0.5)
            logs = await engine.docker_async("logs", container)
            assert status == "healthy", logs[1][-2000:] + logs[2][-2000:]
            app_url = f"http://127.0.0.1:{port}/slack/events"
            ack = await slack.deliver(app_url, slash_command_body("/verify", "help", "U0ALICE", CHANNEL,
                                                                  slack.response_url(), "t"))
            assert ack.status_code == 200
            assert "`ct129`" in ack.json()["text"] and "`ct130`" in ack.json()["text"]
            # A real operation from Slack: the bot in the container reaches the patched host with the mounted key.
            ack = await slack.deliver(app_url, slash_command_body("/verify", "ct129", "U0ALICE", CHANNEL,
                                                                  slack.response_url(), "t"))
            assert ack.status_code == 200
            await slack.wait_until(lambda: any(m.edits and "ct129 verify: FAIL" in m.edits[-1].text
                                               for m in slack.messages_in(CHANNEL) if not m.is_reply),
                                   timeout=60, what="the verdict on the parent")
        finally:
            stopped = await engine.docker_async("stop", "-t", "20", container)
            exit_code = (await engine.docker_async("inspect", "-f", "{{.State.ExitCode}}", container))[1].strip()
            await engine.docker_async("rm", "-f", container)
    assert stopped[0] == 0 and exit_code == "0", f"serve did not stop cleanly on SIGTERM: exit {exit_code}"


def test_under_ci_a_machine_that_cannot_run_docker_fails_instead_of_skipping(tmp_path: Path) -> None:
    env = {**os.environ, "CI": "true", UNAVAILABLE_ENV: "docker"}
    env.pop("PROOFBOT_REQUIRE_LABS", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{__file__}::"
                          "test_the_image_runs_proofbot_as_uid_10001"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "docker made unavailable" in run.stdout and "1 error" in run.stdout, run.stdout[-2000:]
