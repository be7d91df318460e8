"""The package that the Dockerfile installs (`pip install .`) holds every module of the repo."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

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
