"""Tier 1: the package probe run in this process says, line for line, what the real guard + probe run says.

On a host the probe is ``-c`` source under a root-owned ``python3 -I -S`` (``package_guard``), where
coverage cannot follow it; the coverage figure counts its lines from this in-process twin
(``package_probe.main``, importing ``package_probe_fs`` instead of the pasted copy). That figure is
honest only if the twin IS the real run: each case here is a real pip install, edited as a hostile
owner would, probed both ways, and the two outputs must agree (all but which interpreter hashed).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.demo.wheel import make_env, pip_install, site_packages, write_source
from commands.checks import package_probe
from commands.checks.package import package_argv, parse_package
from commands.command_result import CommandResult

DIST = "twin-dist"
PACKAGE = "twin_dist"
MODULES = {"__init__.py": "VALUE = 1\n", "core.py": "def run():\n    return 'core'\n",
           "cli.py": "def main():\n    return 0\n"}
# Which interpreter hashed differs by design: the host's /usr/bin/python3 there, this venv's python here.
BY_DESIGN = ("hasher", "hasher_version")


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def pristine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Path]:
    """A venv holding DIST (a console script too), installed by the real pip; each case edits a copy."""
    root = tmp_path_factory.mktemp("twin")
    python = await make_env(root / "env")
    source = write_source(root / "src", DIST, "1.0", MODULES, scripts={"twin": "twin_dist.cli:main"})
    await pip_install(python, str(source))
    yield root / "env"


def real(python: str, dist: str) -> tuple[int, list[dict[str, Any]]]:
    code, output = real_output(python, dist)
    return code, [json.loads(line) for line in output.decode().splitlines()]


def real_output(python: str, dist: str) -> tuple[int, bytes]:
    done = subprocess.run(package_argv(python, dist), capture_output=True, check=False, timeout=120)
    return done.returncode, done.stdout


def twin(python: str, dist: str) -> tuple[int, list[dict[str, Any]]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = package_probe.main(python, package_probe.normalise(dist))
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in record.items() if k not in BY_DESIGN} for record in records]


def site(env: Path) -> Path:
    return site_packages(env / "bin" / "python")


def dist_info(env: Path) -> Path:
    return site(env) / f"{PACKAGE}-1.0.dist-info"


def edit_files(env: Path) -> None:
    package = site(env) / PACKAGE
    core = package / "core.py"
    core.write_text(core.read_text().replace("core", "CORE"))  # same size
    (package / "__init__.py").unlink()
    (package / "added.py").write_text("X = 1\n")
    (package / "link.py").symlink_to("/etc/hostname")
    (package / "linked_dir").symlink_to("/etc")
    script = env / "bin" / "twin"
    script.write_text(script.read_text() + "import os\n")


def odd_rows(env: Path) -> None:
    with (dist_info(env) / "RECORD").open("a") as record:
        record.write("only,two\n../../../../etc/hostname,sha256=AAAA,5\n"
                     f"{PACKAGE}/core.py,sha512=AAAA,10\n\"{PACKAGE}/odd\nname.py\",,\n")


def no_record(env: Path) -> None:
    (dist_info(env) / "RECORD").unlink()


def record_is_a_link(env: Path) -> None:
    record = dist_info(env) / "RECORD"
    record.unlink()
    record.symlink_to("/etc/hostname")


def editable(env: Path) -> None:
    (dist_info(env) / "direct_url.json").write_text(json.dumps({"url": "file:///src", "dir_info": {"editable": True}}))


def bad_direct_url(env: Path) -> None:
    (dist_info(env) / "direct_url.json").write_text("[not an object")


def egg_info(env: Path) -> None:
    shutil.rmtree(dist_info(env))
    (site(env) / f"{PACKAGE}-1.0.egg-info").mkdir()


def shared_file(env: Path) -> None:
    """A namespace dir: a file another dist's RECORD lists is not this dist's extra."""
    (site(env) / PACKAGE / "plugin.py").write_text("P = 1\n")
    (site(env) / PACKAGE / "__pycache__" / "stray.cpython-311.pyc").write_bytes(b"\0")  # never proof either way
    other = site(env) / "other-2.0.dist-info"
    other.mkdir()
    (other / "RECORD").write_text(f"{PACKAGE}/plugin.py,,\n\"unclosed\n")


def system_site(env: Path) -> None:
    cfg = env / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace("include-system-site-packages = false",
                                           "include-system-site-packages = true"))


def lib_link(env: Path) -> None:
    """A site-packages that is a symlink is named, never followed."""
    lib = site(env).parent
    moved = env / "elsewhere"
    site(env).rename(moved)
    (lib / "site-packages").symlink_to(moved)


def odd_files(env: Path) -> None:
    """Rows that name a dir, a path through a link or a file, a NUL, a FIFO, a bad digest."""
    os.mkfifo(site(env) / PACKAGE / "pipe")
    with (dist_info(env) / "RECORD").open("a") as record:
        record.write(f"{PACKAGE}/linked_dir/hostname,,\n{PACKAGE},,\n{PACKAGE}/core.py/x,,\n"
                     f"{PACKAGE}/a\0b,,\n{PACKAGE}/pipe,,\n{PACKAGE}/cli.py,sha256=A,25\n")
    (site(env) / PACKAGE / "linked_dir").symlink_to("/etc")


def hard_link(env: Path) -> None:
    """An owner other than root hard-links a root-only file into the package: its digest would tell what it holds."""
    secret = env.parent / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    core = site(env) / PACKAGE / "core.py"
    core.unlink()
    os.link(secret, core)
    subprocess.run(["chown", "-R", "-h", "65534:65534", str(env)], check=True, timeout=60)
    os.chown(core, 0, 0)


def rewrite_header(env: Path, header: str) -> None:
    script = env / "bin" / "twin"
    script.write_text(header + script.read_text().split("\n", 1)[1])


def package_link(env: Path) -> None:
    package = site(env) / PACKAGE
    package.rename(env / "moved")
    package.symlink_to(env / "moved")


def record_bytes(env: Path) -> None:
    with (dist_info(env) / "RECORD").open("ab") as record:
        record.write(b"twin_dist/\xff\xfe.py,,\n")


def no_cfg(env: Path) -> None:
    (env / "pyvenv.cfg").unlink()


def home_missing(env: Path) -> None:
    (env / "pyvenv.cfg").write_text("home = /nonexistent/bin\ninclude-system-site-packages = true\n")


# Each case and what its user is told (status, then words the finding must say): not vacuous cases.
CASES: dict[str, tuple[Callable[[Path], None], str, tuple[str, ...]]] = {
    "pristine": (lambda env: None, "pass", ("twin-dist 1.0 (installer pip)",)),
    "edited": (edit_files, "fail", ("core.py","__init__.py", "added.py", "link.py", "linked_dir", "bin/twin")),
    "odd-rows": (odd_rows, "warn", ("cannot be trusted", "2 field")),
    "no-record": (no_record, "error", ("RECORD",)),
    "record-link": (record_is_a_link, "error", ("symlink",)),
    "editable": (editable, "fail", ("direct_url.json differs from RECORD",)),
    "bad-direct-url": (bad_direct_url, "fail", ("direct_url.json differs from RECORD",)),
    "egg-info": (egg_info, "error", ("egg-info",)),
    "shared": (shared_file, "pass", ("twin-dist 1.0", "4 __pycache__ .pyc ignored")),
    "system-site": (system_site, "pass", ("twin-dist 1.0",)),
    "site-link": (lib_link, "error", ("not installed",)),
    "odd-files": (odd_files, "fail", ("reached through the symlink", "twin_dist is not a regular file",
                                      "core.py/x is not a regular file", "twin_dist/pipe is not a regular file")),
    "hard-link": (hard_link, "fail", ("is a hard link to a file of uid 0",)),
    # Another installer's #! than pip wrote (for the first env's path, not this copy's): a change, not proof.
    "script-header": (lambda env: rewrite_header(env, "#!/usr/bin/env python3\n"), "fail", ("bin/twin differs",)),
    "distlib-header": (lambda env: rewrite_header(env, f"#!/bin/sh\n'''exec' \"{env}/bin/python\" \"$0\" \"$@\"\n"
                                                       "' '''\n"), "fail", ("bin/twin differs",)),
    "package-link": (package_link, "fail", ("symlink",)),
    "record-bytes": (record_bytes, "error", ("RECORD",)),
    "no-cfg": (no_cfg, "pass", ("twin-dist 1.0",)),
    "home-missing": (home_missing, "pass", ("twin-dist 1.0",)),
}


@pytest.mark.parametrize("case", CASES)
def test_the_twin_says_what_the_real_probe_says(case: str, pristine: Path, tmp_path: Path) -> None:
    env = tmp_path / "an env"  # a space: the installer headers a script may have are quoted
    shutil.copytree(pristine, env, symlinks=True)
    edit, status, said = CASES[case]
    edit(env)
    python = str(env / "bin" / "python")
    real_code, output = real_output(python, DIST)
    finding = parse_package(python, DIST, CommandResult("probe", real_code, output, 0.05))
    shown = finding.summary + (finding.evidence.output if finding.evidence else "")
    assert finding.status == status and all(words in shown for words in said), (finding.status, shown)
    real_records = [json.loads(line) for line in output.decode().splitlines()]
    assert real_records and real_records[0]["t"] == "env", real_records  # the guard ran the probe
    assert real_records[0]["hasher"] != sys.executable  # the host's interpreter, not this venv's
    twin_code, twin_records = twin(python, DIST)
    assert (twin_code, comparable(twin_records)) == (real_code, comparable(real_records))


def test_the_twin_agrees_on_a_missing_interpreter_a_linked_prefix_and_an_absent_dist(pristine: Path,
                                                                                      tmp_path: Path) -> None:
    (tmp_path / "linked").symlink_to(pristine)
    for python, dist in ((str(tmp_path / "none" / "bin" / "python"), DIST),
                         (str(tmp_path / "linked" / "bin" / "python"), DIST),
                         (str(pristine / "bin" / "python"), "Not_There")):
        real_code, real_records = real(python, dist)
        twin_code, twin_records = twin(python, dist)
        assert real_code == 3 and real_records[-1]["t"] == "error", real_records
        assert (twin_code, comparable(twin_records)) == (real_code, comparable(real_records))

