"""Every command proofbot prints for its user runs as printed, in a fresh shell: the demo's closing
lines, README's quick start on the demo's host, and the CLI's hints (next steps, `undo with:`).

"Fresh shell" is `bash -c LINE` with a clean environment and the PATH a user's login shell has
(no venv on it), from the directory the user is in; each line is run exactly as printed."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from bot.demo.host import demo_host
from tests.conftest import REPO

USER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FRESH_ENV = {"PATH": USER_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
DEMO_TIMEOUT_S = 240
INSTALL_TIMEOUT_S = 600  # scripts/demo on a fresh clone: pip installs `.[demo]` first
BROKEN_AS_PRINTED = ("command not found", "file not found", "No such file or directory\n", "usage: ",
                     "unrecognized arguments")


async def fresh_shell(line: str, cwd: Path, *, answer: bytes | None = None,
                      timeout_s: float = DEMO_TIMEOUT_S) -> tuple[int, str, str]:
    """Run LINE as a user pastes it; ``answer`` is typed at a terminal (a pty) when it asks."""
    master = slave = -1
    if answer is not None:
        master, slave = os.openpty()
        os.write(master, answer)
    try:
        child = await asyncio.create_subprocess_exec(
            "bash", "-c", line, cwd=cwd, env=FRESH_ENV, stdin=slave if slave >= 0 else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(timeout_s):
            out, err = await child.communicate()
    finally:
        for fd in (master, slave):
            if fd >= 0:
                os.close(fd)
    return child.returncode if child.returncode is not None else -1, out.decode(), err.decode()


def assert_ran(line: str, run: tuple[int, str, str]) -> None:
    code, out, err = run
    assert code not in (2, 126, 127), f"{line!r} exited {code}:\n{out[-2000:]}\n{err[-2000:]}"
    assert not [words for words in BROKEN_AS_PRINTED if words in err], f"{line!r}:\n{err[-2000:]}"


def fresh_clone(tmp_path: Path) -> Path:
    """What `git clone` gives: the sources and scripts, no .venv (scripts/demo makes its own)."""
    root = tmp_path / "clone"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for tree in ("bot", "commands", "scripts"):
        shutil.copytree(REPO / tree, root / tree, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, root / name)
    return root


def readme_quick_start() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"scripts/demo --keep.*?```sh\n(.*?)```", readme, re.S)
    assert block is not None, "README's quick start on the demo host"
    return block.group(1).splitlines()


@pytest.mark.timeout(900)  # a venv installed from scratch, then the demo twice, on a busy machine
async def test_the_demo_and_readme_quick_start_run_as_printed(tmp_path: Path) -> None:
    root = fresh_clone(tmp_path)
    elsewhere = tmp_path / "elsewhere"  # where the user is: not the clone's root
    elsewhere.mkdir()
    code, out, err = await fresh_shell(f"{root}/scripts/demo", elsewhere, timeout_s=INSTALL_TIMEOUT_S)
    assert code == 0, out[-3000:] + err[-3000:]
    # Only what the demo needs (`.[demo]`): proofbot and supervisord, none of the dev tools.
    installed = {path.name for path in (root / ".venv" / "bin").iterdir()}
    assert {"proofbot", "supervisord"} <= installed
    assert not installed & {"pytest", "mypy", "ruff", "lint-imports", "mkdocs"}, sorted(installed)
    explore = re.search(r"Explore the log: (.*?)   ·   `(.*?)` leaves the lab host up", out)
    assert explore is not None, out[-2000:]
    audit, keep = explore.groups()
    run = await fresh_shell(audit, elsewhere)
    assert_ran(audit, run)
    assert run[0] == 0 and "ct129" in run[1]

    # `demo --keep`, as printed, from the clone's root: README's three steps then work on its host.
    child = await asyncio.create_subprocess_exec("bash", "-c", keep, cwd=root, env=FRESH_ENV,
                                                 stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert child.stdout is not None
    printed: list[str] = []
    try:
        async with asyncio.timeout(DEMO_TIMEOUT_S):
            while not (line := (await child.stdout.readline()).decode()).startswith("The lab host stays up"):
                assert line, "the demo ended before it kept its host"
            printed = [(await child.stdout.readline()).decode().strip() for _ in range(2)]
        for line in printed + readme_quick_start():
            run = await fresh_shell(line, root if line.startswith(".venv/") else elsewhere)
            assert_ran(line, run)
            assert run[0] == 0, f"{line!r} exited {run[0]}:\n{run[1][-2000:]}\n{run[2][-2000:]}"
    finally:
        os.killpg(child.pid, 2)  # Ctrl-C, as the demo asks
        async with asyncio.timeout(60):
            await child.communicate()
    assert [line.split()[1:3] for line in printed] == [["verify", "ct129"], ["audit", "ct129"]]


async def test_cli_hints_carry_the_options_given(tmp_path: Path) -> None:
    proofbot = REPO / ".venv" / "bin" / "proofbot"  # as a user types it with the venv not on PATH
    async with demo_host("ct129", extra_file=False) as host:
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(host.inventory()))
        # relative paths, as a user gives them from where they are
        verify = f"{proofbot} verify ct129 --inventory inventory.yml --db audit.db"
        code, out, err = await fresh_shell(verify, tmp_path)
        assert code == 1, out + err
        hints = [line.split("→ ", 1)[1] for line in out.splitlines() if "→ " in line]
        assert hints and all(hint.endswith(" --inventory inventory.yml --db audit.db") for hint in hints
                             if str(proofbot) in hint), hints
        restore = next(hint.split(": ", 1)[1] for hint in hints if " restore " in hint)
        assert restore == f"{proofbot} restore ct129 pre-ddtree --inventory inventory.yml --db audit.db"
        run = await fresh_shell(restore, tmp_path, answer=b"y\n")
        assert_ran(restore, run)
        assert run[0] == 0, run[1] + run[2]
        undo = next(line.removeprefix("undo with: ") for line in run[1].splitlines() if line.startswith("undo with: "))
        assert undo.endswith(" --inventory inventory.yml --db audit.db") and undo.startswith(f"{proofbot} restore ")
        run = await fresh_shell(undo, tmp_path, answer=b"y\n")
        assert_ran(undo, run)
        assert run[0] == 0, run[1] + run[2]
    chain = f"{proofbot} audit verify --db audit.db"
    code, out, err = await fresh_shell(chain, tmp_path)
    assert code == 0, out + err
    anchor = out.split("later `", 1)[1].split("`", 1)[0]
    assert anchor.startswith(f"{proofbot} audit verify --db audit.db --anchor ")
    run = await fresh_shell(anchor, tmp_path)
    assert_ran(anchor, run)
    assert run[0] == 0 and "chain intact" in run[1], run[1] + run[2]
