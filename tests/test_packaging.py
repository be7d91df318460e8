"""The package that the Dockerfile installs holds every module and data file of the repo, and
requirements.lock pins every runtime dependency (and nothing the bot does not need)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import REPO


def test_wheel_holds_every_module(tmp_path: Path) -> None:
    # A clean copy: setuptools would otherwise reuse a stale build/ dir and hide a missing package.
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", ".lab-cache", "build", "*.egg-info", "__pycache__", ".*_cache"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path),
                            str(source)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    [wheel] = list(tmp_path.glob("proofbot-*.whl"))
    packaged = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(path.relative_to(REPO))
               for package in ("commands", "bot") for path in (REPO / package).rglob("*.py")}
    assert modules, "no modules found to compare"
    assert modules - packaged == set()
    # every data file the packages hold (tracked by git, not a module) is in the wheel too
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "commands", "bot"], capture_output=True, text=True,
                             check=True, timeout=60).stdout.split()
    data = {path for path in tracked if not path.endswith(".py")}
    assert "commands/store/datasette-metadata.yml" in data
    assert data - packaged == set()


def test_every_package_data_pattern_matches_a_file() -> None:
    """An entry that matches nothing (as `bot = ["*.yml"]` did) says a file is shipped that is not."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for package, globs in patterns.items():
        for glob in globs:
            assert list((REPO / package.replace(".", "/")).glob(glob)), f"{package}: {glob} matches no file"


def test_the_lock_pins_every_runtime_dependency_within_its_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    # pip's hash-checking format: "name==version \" then one "    --hash=sha256:..." line per pin.
    entries = (REPO / "requirements.lock").read_text().replace("\\\n", " ").splitlines()
    pins = {canonicalize_name(name): Version(version) for name, version in (
        line.split()[0].split("==") for line in entries if line and not line.startswith("#"))}
    unhashed = [line for line in entries if line and not line.startswith("#") and "--hash=sha256:" not in line]
    assert not unhashed, "every pin needs its wheel's sha256 (run scripts/lock)"
    for dependency in map(Requirement, project["dependencies"]):
        pinned = pins.get(canonicalize_name(dependency.name))
        assert pinned is not None and pinned in dependency.specifier, (dependency, pinned)
    extras = {canonicalize_name(Requirement(r).name) for group in project["optional-dependencies"].values()
              for r in group}
    assert not extras & set(pins), "a dev or demo tool is pinned for the runtime image"
    assert "--require-hashes -r /tmp/requirements.lock" in (REPO / "Dockerfile").read_text()
