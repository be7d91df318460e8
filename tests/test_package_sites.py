"""Differential: the site dirs the probe finds from an environment's layout and ``pyvenv.cfg`` (read as data)
are the ones that environment's own interpreter reports (``site.getsitepackages()``), for every layout here.

The probe never runs the environment; this test does (environments it made itself, and the host's
own interpreters), to hold the probe's reading against the real ``site``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from commands.checks.package import package_argv

REAL_SITES = "import json, os, site; print(json.dumps([p for p in site.getsitepackages() if os.path.isdir(p)]))"


def probe_sites(python: str) -> list[str]:
    done = subprocess.run(package_argv(python, "no-such-dist"), capture_output=True, text=True, check=False,
                          timeout=60)
    env = json.loads(done.stdout.splitlines()[0])
    assert env["t"] == "env", done.stdout
    return list(env["site"])


def real_sites(python: str) -> list[str]:
    done = subprocess.run([python, "-c", REAL_SITES], capture_output=True, text=True, check=True, timeout=60)
    return list(json.loads(done.stdout))


def venv(path: Path, base: str, *flags: str) -> str:
    subprocess.run([base, "-m", "venv", "--without-pip", *flags, str(path)], check=True, timeout=120)
    return str(path / "bin" / "python")


def no_system_key(python: str) -> str:
    """A pyvenv.cfg without include-system-site-packages: ``site`` takes that as true."""
    cfg = Path(python).parent.parent / "pyvenv.cfg"
    cfg.write_text("".join(line for line in cfg.read_text().splitlines(keepends=True)
                           if not line.startswith("include-system-site-packages")))
    return python


@pytest.mark.parametrize("layout", ["venv", "venv --system-site-packages", "venv, no include key",
                                    "system /usr/bin/python3", "the lab's venv", "the lab's base interpreter",
                                    "venv of the lab's base"])
def test_the_probe_finds_the_site_dirs_the_environments_own_site_reports(layout: str, tmp_path: Path) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    python = {
        "venv": lambda: venv(tmp_path / "env", "/usr/bin/python3"),
        "venv --system-site-packages": lambda: venv(tmp_path / "env", "/usr/bin/python3", "--system-site-packages"),
        "venv, no include key": lambda: no_system_key(venv(tmp_path / "env", "/usr/bin/python3")),
        "system /usr/bin/python3": lambda: "/usr/bin/python3",
        "the lab's venv": lambda: sys.executable,
        "the lab's base interpreter": lambda: base,
        "venv of the lab's base": lambda: venv(tmp_path / "env", base),
    }[layout]()
    real = real_sites(python)
    assert real, "every layout here has a site dir"
    assert probe_sites(python) == real
