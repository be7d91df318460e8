"""Tier 1 (root: it chowns and chgrps): the ownership guard of a compose restart's docker-compose and compose file
(``commands.checks.compose_guard``), run by the real ``sh``, ``stat``, ``readlink`` and ``realpath`` on real files:
a path another user could write is refused with its owner and mode, and nothing is run."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from commands.checks.compose_guard import guard_argv, guarded_paths, refusal
from commands.command_result import CommandResult
from commands.errors import Refused
from commands.inventory import Service
from commands.restart.container import act_guard, refuse_unguarded
from tests.lab import skip_or_fail

OTHER = 1000  # a uid and gid that are not root's


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        skip_or_fail("the engine guard's tests chown files to another user: run as root")


def tree(tmp_path: Path) -> Path:
    """tmp_path/t/bin/tool, root-owned, 755, every directory 755 (tmp_path's own ancestors include sticky /tmp)."""
    top = tmp_path / "t"
    (top / "bin").mkdir(parents=True)
    tool = top / "bin" / "tool"
    tool.write_text("#!/bin/sh\ntouch \"$0.ran\"\n")
    for path in (tmp_path, top, top / "bin", tool):
        path.chmod(0o755)
    return tool


def guard(*paths: str, path_env: str = "/usr/bin:/bin") -> str | None:
    run = subprocess.run(["/bin/sh", *guard_argv(list(paths))[1:]], capture_output=True, text=True, timeout=30,
                         env={"PATH": path_env})
    result = CommandResult("guard", run.returncode, (run.stdout + run.stderr).encode(), 0.0)
    why = refusal(result)
    assert (why is None) == (run.returncode == 0), run
    return why


def _chown(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid, follow_symlinks=False)


def _link(target: str, at: Path) -> Path:
    at.symlink_to(target)
    return at


# name: (what to do to the tree, which path to guard (None: the tool), the words of the refusal or None: passes)
Setup = Callable[[Path], Path | None]
CASES: dict[str, tuple[Setup, str | None]] = {
    "clean": (lambda tool: None, None),
    "group-writable by root's group": (lambda tool: tool.chmod(0o775), None),
    "group-writable by another group": (
        lambda tool: (_chown(tool, 0, OTHER), tool.chmod(0o775)) and None,
        "/t/bin/tool is writable by group gid 1000 (owner uid 0, group gid 1000, mode 775)"),
    "owned by another user": (lambda tool: _chown(tool, OTHER, 0),
                              "/t/bin/tool is writable by its owner uid 1000 (owner uid 1000, group gid 0, mode 755)"),
    "world-writable": (lambda tool: tool.chmod(0o757), "/t/bin/tool is writable by every user"),
    "its directory world-writable": (lambda tool: tool.parent.chmod(0o777),
                                     "/t/bin is writable by every user (owner uid 0, group gid 0, mode 777)"),
    "its directory sticky": (lambda tool: tool.parent.chmod(0o1777), "/t/bin is writable by every user"),
    "a sticky ancestor": (lambda tool: tool.parent.parent.chmod(0o1777), None),
    "an ancestor group-writable": (lambda tool: (_chown(tool.parent.parent, 0, OTHER),
                                                 tool.parent.parent.chmod(0o775)) and None,
                                   "/t is writable by group gid 1000"),
    "a link in a world-writable directory": (
        lambda tool: (tool.parent.parent.joinpath("w").mkdir(mode=0o777), tool.parent.parent.joinpath("w").chmod(
            0o777)) and _link(str(tool), tool.parent.parent / "w" / "tool"), "/t/w is writable by every user"),
    "a link to a file in a group-writable directory": (
        lambda tool: (_chown(tool.parent, 0, OTHER), tool.parent.chmod(0o775))
        and _link("bin/tool", tool.parent.parent / "tool"), "/t/bin is writable by group gid 1000"),
    "a clean relative link through ..": (lambda tool: (tool.parent.parent.joinpath("x").mkdir(mode=0o755))
                                         or _link("../bin/tool", tool.parent.parent / "x" / "tool"), None),
    "a linked directory on the way, group-writable": (
        lambda tool: (_chown(tool.parent, 0, OTHER), tool.parent.chmod(0o775),
                      _link("bin", tool.parent.parent / "dirlink")) and tool.parent.parent / "dirlink" / "tool",
        "/t/bin is writable by group gid 1000"),
    "missing": (lambda tool: tool.parent / "nothere", "/t/bin/nothere: no such file"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_path_another_user_could_write_is_refused_with_its_owner_and_mode(case: str, tmp_path: Path) -> None:
    setup, words = CASES[case]
    tool = tree(tmp_path)
    guarded = setup(tool) or tool
    why = guard(str(guarded))
    if words is None:
        assert why is None, why
    else:
        assert why is not None and f"{tmp_path}{words}" in why, why
        assert why.endswith(": nothing run")


def test_a_bare_cli_name_is_judged_where_path_finds_it(tmp_path: Path) -> None:
    tool = tree(tmp_path)
    assert guard("tool", path_env=f"{tool.parent}:/usr/bin:/bin") is None
    _chown(tool.parent, 0, OTHER)
    tool.parent.chmod(0o775)
    why = guard("tool", path_env=f"{tool.parent}:/usr/bin")
    assert why is not None and f"{tool.parent} is writable by group gid {OTHER}" in why
    missing = guard("no-such-cli-here", path_env=f"{tool.parent}:/usr/bin:/bin")
    assert missing == "no-such-cli-here: not found on PATH: nothing run"


def test_a_compose_restart_refuses_a_group_writable_compose_file(tmp_path: Path) -> None:
    tool = tree(tmp_path)
    compose_file = tool.parent / "docker-compose.yml"
    compose_file.write_text("services: {}\n")
    compose_file.chmod(0o664)
    _chown(compose_file, 0, OTHER)
    service = Service.model_validate({"manager": "compose", "project": "p", "service": "s",
                                      "compose_file": str(compose_file), "engine": {"compose": str(tool)},
                                      "health_url": "http://127.0.0.1:1/health"})
    assert guarded_paths(service) == [str(tool), str(compose_file)]
    [reads] = act_guard(service)
    [argv] = reads.argvs
    assert isinstance(argv, list)
    run = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    result = CommandResult("guard", run.returncode, run.stdout + run.stderr, 0.0)
    with pytest.raises(Refused) as refused:
        refuse_unguarded("ct1", service, [result])
    assert f"ct1: not restarting p/s: {compose_file} is writable by group gid {OTHER}" in str(refused.value)
    assert act_guard(service.model_copy(update={"manager": "docker", "container": "c"})) == []


def test_a_dot_env_beside_the_compose_file_is_judged_when_there(tmp_path: Path) -> None:
    """docker-compose 1.29 reads the project dir's `.env` (variables of the compose file) as root."""
    tool = tree(tmp_path)
    compose_file = tool.parent / "docker-compose.yml"
    compose_file.write_text("services: {}\n")
    service = Service.model_validate({"manager": "compose", "project": "p", "service": "s",
                                      "compose_file": str(compose_file), "engine": {"compose": str(tool)},
                                      "health_url": "http://127.0.0.1:1/health"})

    def guard_of_the_act() -> CommandResult:
        [reads] = act_guard(service)
        [argv] = reads.argvs
        assert isinstance(argv, list)
        run = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        return CommandResult("guard", run.returncode, run.stdout + run.stderr, 0.0)

    assert refusal(guard_of_the_act()) is None  # none there: nothing to judge
    dot_env = tool.parent / ".env"
    dot_env.write_text("TAG=latest\n")
    assert refusal(guard_of_the_act()) is None
    _chown(dot_env, OTHER, OTHER)
    assert refusal(guard_of_the_act()) == (f"{dot_env} is writable by its owner uid {OTHER} (owner uid {OTHER}, "
                                           f"group gid {OTHER}, mode 644): nothing run")
