"""Tier 1 (root: it chowns): what the engine guard judges besides the CLI's own file, run by the real `sh`, `find`,
`stat` and `python3` of this machine: the daemon's socket the CLI will talk to (a real unix socket), and a Python
CLI (docker-compose 1.29 is one) with its interpreter and the dirs it imports from; PYTHON* variables never reach
it. Each refusal names the path, its owner and mode, and nothing runs."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from commands.checks.compose_guard import guard_argv, refusal
from commands.checks.engine_guard import guarded
from commands.checks.engine_guard import refusal as engine_refusal
from commands.command_result import CommandResult
from commands.errors import Refused
from commands.inventory import Service
from commands.restart.container import refuse_unguarded
from tests.lab import skip_or_fail

OTHER = 1000  # a uid and gid that are not root's
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        skip_or_fail("the owner guard's tests chown files to another user: run as root")


@pytest.fixture
def place() -> Iterator[Path]:
    """A root-owned mode-755 dir whose parents are too (/tmp, where pytest's dirs sit, is world-writable)."""
    safe = Path(tempfile.mkdtemp(prefix="pb-owner-", dir="/var/lib"))
    safe.chmod(0o755)
    try:
        yield safe
    finally:
        shutil.rmtree(safe)


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(guarded(argv), capture_output=True, text=True, timeout=60, check=False, env={**ENV, **env})


def _docker(place: Path) -> Path:
    """A stand-in docker CLI that says which daemon it was sent to and leaves a marker."""
    cli = place / "docker"
    cli.write_text(f"#!/bin/sh\necho \"daemon=$DOCKER_HOST context=${{DOCKER_CONTEXT-}}\"\ntouch {place}/ran\n")
    cli.chmod(0o755)
    return cli


def _socket(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    return server


@pytest.mark.parametrize(("case", "words"), [
    ("root-owned, group docker may write", None),
    ("owned by another user", "is writable by its owner uid 1000 (owner uid 1000, group gid 1000, mode 660)"),
    ("world-writable", "is writable by every user (owner uid 0, group gid 0, mode 666)"),
    ("a regular file", "is not a socket (owner uid 0, mode 600)"),
    ("in a dir another user owns", "is writable by its owner uid 1000 (owner uid 1000, group gid 0, mode 755)"),
    ("a link to a socket in a world-writable dir", "is writable by every user (owner uid 0, group gid 0, mode 1777)"),
    ("missing, its dir root's", None),
    ("missing, its dir world-writable", "is writable by every user (owner uid 0, group gid 0, mode 777)"),
])
def test_the_daemon_socket_is_one_only_root_could_have_put_there(place: Path, case: str, words: str | None) -> None:
    cli = _docker(place)
    run_dir = place / "run"
    run_dir.mkdir(mode=0o755)
    sock = run_dir / "docker.sock"
    servers = []
    if case.startswith("missing"):
        run_dir.chmod(0o777 if "world" in case else 0o755)
    elif case == "a regular file":
        sock.write_text("")
        sock.chmod(0o600)
    elif case.startswith("a link"):
        public = place / "public"
        public.mkdir()
        public.chmod(0o1777)
        servers.append(_socket(public / "docker.sock"))
        sock.symlink_to(public / "docker.sock")
    else:
        servers.append(_socket(sock))
        os.chown(sock, *((OTHER, OTHER) if case == "owned by another user" else (0, OTHER)))
        sock.chmod(0o666 if case == "world-writable" else 0o660)
        if case == "world-writable":
            os.chown(sock, 0, 0)
        if case == "in a dir another user owns":
            os.chown(run_dir, OTHER, 0)
    try:
        run = _run([str(cli), "-H", f"unix://{sock}", "ps"])
    finally:
        for server in servers:
            server.close()
    if words is None:
        assert run.returncode == 0 and (place / "ran").exists(), run
        return
    assert run.returncode == 126, run
    assert run.stdout.startswith(f"proofbot: engine socket {sock} refused, nothing run: "), run.stdout
    assert words in run.stdout, run.stdout
    assert not (place / "ran").exists()


def test_the_socket_checked_is_the_one_the_cli_is_sent_to(place: Path) -> None:
    """No `-H`: DOCKER_HOST's socket, else Docker's default, exported so that no CLI context sends it elsewhere."""
    cli = _docker(place)
    run = _run([str(cli), "ps"], DOCKER_CONTEXT="elsewhere")
    assert run.returncode == 0 and run.stdout == "daemon=unix:///var/run/docker.sock context=\n", run
    (place / "ran").unlink()
    evil = place / "evil"
    evil.mkdir()
    os.chown(evil, OTHER, OTHER)
    with _socket(evil / "docker.sock"):
        run = _run([str(cli), "ps"], DOCKER_HOST=f"unix://{evil}/docker.sock")
    assert run.returncode == 126 and f"proofbot: engine socket {evil}/docker.sock refused" in run.stdout, run
    run = _run([str(cli), "ps"], DOCKER_HOST="tcp://127.0.0.1:2375")
    assert run.returncode == 126 and run.stdout == (
        "proofbot: engine socket tcp://127.0.0.1:2375 refused, nothing run: not a unix socket whose owner can be "
        "checked (name the daemon's socket in the inventory: engine: unix:///PATH)\n"), run
    assert not (place / "ran").exists()


def test_podman_run_as_root_talks_to_no_daemon(place: Path) -> None:
    cli = place / "podman"
    cli.write_text("#!/bin/sh\necho \"remote=${CONTAINER_HOST-none} daemon=${DOCKER_HOST-none}\"\n")
    cli.chmod(0o755)
    run = _run([str(cli), "ps"], CONTAINER_HOST="unix:///tmp/planted.sock")
    assert (run.returncode, run.stdout) == (0, "remote=none daemon=none\n"), run


def _python_cli(place: Path, interpreter: str = "/usr/bin/python3") -> Path:
    """A Python CLI as docker-compose 1.29 is one: `#!` python, importing `compose` (here from its own dir)."""
    package = place / "bin" / "compose"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"open('{place}/ran', 'w').write('the judged compose')\n")
    cli = place / "bin" / "docker-compose"
    cli.write_text(f"#!{interpreter}\nimport compose\nprint(open('{place}/ran').read())\n")
    cli.chmod(0o755)
    return cli


def test_a_python_cli_runs_with_what_was_judged_and_no_python_variables(place: Path) -> None:
    cli = _python_cli(place)
    shadow = Path(tempfile.mkdtemp(prefix="pb-shadow-"))  # a dir another user could fill
    try:
        (shadow / "compose").mkdir()
        (shadow / "compose" / "__init__.py").write_text(f"open('{place}/ran', 'w').write('the shadow')\n")
        (shadow / "sitecustomize.py").write_text(f"open('{place}/startup', 'w')\n")  # run at every start
        run = _run([str(cli), "restart"], PYTHONPATH=str(shadow))
    finally:
        shutil.rmtree(shadow)
    assert (run.returncode, run.stdout) == (0, "the judged compose\n"), run
    assert not (place / "startup").exists()


@pytest.mark.parametrize("what", ["the compose package", "a module in it", "the interpreter's dir", "a .pth"])
def test_a_python_cli_whose_imports_another_user_could_change_is_refused(place: Path, what: str) -> None:
    interpreter = place / "py" / "python3"
    interpreter.parent.mkdir()
    interpreter.symlink_to("/usr/bin/python3")
    cli = _python_cli(place, str(interpreter))
    package = place / "bin" / "compose"
    changed = {"the compose package": package, "a module in it": package / "__init__.py",
               "the interpreter's dir": interpreter.parent, "a .pth": place / "bin" / "x.pth"}[what]
    if what == "a .pth":
        changed.write_text("")
    os.chown(changed, OTHER, 0)
    mode = "755" if changed.is_dir() else "644"
    why = f"{changed} is writable by its owner uid {OTHER} (owner uid {OTHER}, group gid 0, mode {mode})"
    run = _run([str(cli), "restart"])
    assert run.returncode == 126 and run.stdout.startswith(f"proofbot: engine CLI {cli} refused, nothing run: "), run
    assert why in run.stdout, run.stdout
    assert not (place / "ran").exists()
    plan = subprocess.run(guard_argv([str(cli)]), capture_output=True, timeout=60, check=False, env=ENV)
    assert refusal(CommandResult("guard", plan.returncode, plan.stdout, 0.0)) == f"{why}: nothing run"


def test_the_real_docker_compose_passes_and_runs() -> None:
    """Debian's docker-compose 1.29 (`#!/usr/bin/python3`, `compose` from /usr/lib/python3/dist-packages)."""
    if shutil.which("docker-compose") is None:
        skip_or_fail("docker-compose is not installed (the lab's apt packages)")
    run = _run(["docker-compose", "version", "--short"])
    assert run.returncode == 0 and run.stdout.startswith("1.29"), run
    plan = subprocess.run(guard_argv(["docker-compose"]), capture_output=True, timeout=60, check=False, env=ENV)
    assert plan.returncode == 0, plan


def test_an_env_shebang_judges_the_program_the_path_finds(place: Path) -> None:
    """`#!/usr/bin/env python3`: the python3 the SSH user's PATH finds first is the interpreter judged."""
    cli = _python_cli(place, "/usr/bin/env python3")
    theirs = place / "theirs"
    theirs.mkdir()
    (theirs / "python3").symlink_to("/usr/bin/python3")
    os.chown(theirs, OTHER, OTHER)
    run = _run([str(cli)], PATH=f"{theirs}:{ENV['PATH']}")
    assert run.returncode == 126 and f"{theirs} is writable by its owner uid {OTHER}" in run.stdout, run
    assert not (place / "ran").exists()
    run = _run([str(cli)])
    assert (run.returncode, run.stdout) == (0, "the judged compose\n"), run


def test_an_engine_refusal_at_the_state_read_refuses_the_restart_naming_it() -> None:
    """The guard's line as the main-pid step prints it (compose's `ps` step then ends with 1, not 126)."""
    sock = "/run/docker.sock"
    line = (f"proofbot: engine socket {sock} refused, nothing run: {sock} is writable by its owner uid {OTHER} "
            f"(owner uid {OTHER}, group gid 998, mode 660)\n")
    service = Service.model_validate({"manager": "docker", "container": "sglang",
                                      "health_url": "http://127.0.0.1:1/health"})
    assert engine_refusal(CommandResult("inspect", 1, f"{line}compose ps exit 126, containers: \n".encode(), 0.0)) \
        == line.strip().removeprefix("proofbot: ")
    assert engine_refusal(CommandResult("inspect", 0, b"proofbot: engine CLI docker is fine\n", 0.0)) is None
    with pytest.raises(Refused) as refused:
        refuse_unguarded("ct1", service, [CommandResult("inspect", 126, line.encode(), 0.0)])
    assert str(refused.value).startswith(f"ct1: not restarting sglang: engine socket {sock} refused, nothing run: ")
    refuse_unguarded("ct1", service, [CommandResult("inspect", 0, b'{"Pid": 1}\n', 0.0)])  # nothing refused
