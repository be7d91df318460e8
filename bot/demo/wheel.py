"""A tiny real distribution for the lab hosts: a source tree, built and installed by pip into a venv.

pip writes RECORD, INSTALLER and direct_url.json at install time exactly as it does on
a real host, so ``package:<dist>`` meets real files. No network and no ``wheel`` package:
the source tree carries a minimal in-tree PEP 517/660 backend (``backend-path``), so
``pip install --no-index --no-build-isolation`` (and ``-e``) build it offline.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

BACKEND = '''"""Minimal PEP 517/660 backend: zips the package dir into a wheel (editable: a .pth)."""
import base64, hashlib, os, zipfile

NAME, VERSION, PACKAGE, ENTRY_POINTS = {name!r}, {version!r}, {package!r}, {entry_points!r}
TAG = NAME.replace("-", "_") + "-" + VERSION


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{{path}},sha256={{digest}},{{len(data)}}"


def _wheel(directory, entries):
    info = TAG + ".dist-info"
    entries = dict(entries)
    entries[info + "/METADATA"] = f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: {{VERSION}}\\n".encode()
    entries[info + "/WHEEL"] = (b"Wheel-Version: 1.0\\nGenerator: proofbot-lab\\n"
                                b"Root-Is-Purelib: true\\nTag: py3-none-any\\n")
    if ENTRY_POINTS:
        entries[info + "/entry_points.txt"] = ENTRY_POINTS.encode()
    lines = [_record_line(path, data) for path, data in entries.items()] + [info + "/RECORD,,"]
    entries[info + "/RECORD"] = ("\\n".join(lines) + "\\n").encode()
    name = TAG + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as wheel:
        for path, data in entries.items():
            wheel.writestr(path, data)
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    here = os.path.dirname(os.path.abspath(__file__))
    entries = {{}}
    for current, _, files in os.walk(os.path.join(here, PACKAGE)):
        for file in sorted(files):
            full = os.path.join(current, file)
            with open(full, "rb") as handle:
                entries[os.path.relpath(full, here)] = handle.read()
    return _wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    here = os.path.dirname(os.path.abspath(__file__))
    return _wheel(wheel_directory, {{"__editable__." + TAG + ".pth": (here + "\\n").encode()}})
'''


def write_source(root: Path, name: str, version: str, modules: dict[str, str],
                 scripts: dict[str, str] | None = None) -> Path:
    """A source tree for distribution ``name``: one package dir holding ``modules``; ``scripts`` are console
    scripts (name -> ``module:function``) that pip writes into the environment's ``bin/``."""
    package = name.replace("-", "_")
    source = root / f"{package}-src"
    (source / package).mkdir(parents=True)
    for module, text in modules.items():
        (source / package / module).write_text(text)
    entry_points = "".join(f"{script} = {target}\n" for script, target in (scripts or {}).items())
    (source / "lab_backend.py").write_text(BACKEND.format(name=name, version=version, package=package,
                                                          entry_points="[console_scripts]\n" + entry_points
                                                          if entry_points else ""))
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "lab_backend"\nbackend-path = ["."]\n')
    return source


async def make_env(path: Path, base: str = sys.executable) -> Path:
    """A venv of ``base`` (no pip of its own: the lab's pip installs into it with ``--python``); returns its python."""
    await _run(base, "-m", "venv", "--without-pip", str(path))
    return path / "bin" / "python"


async def pip_install(python: Path, *args: str) -> str:
    """``pip install`` into the env of ``python``, offline; args are sources, wheels or pip flags."""
    return await _run(sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
                      "install", "--no-index", "--no-deps", "--no-build-isolation", "--no-cache-dir", *args)


def site_packages(python: Path) -> Path:
    """The site-packages dir of the venv holding ``python`` (same version as the lab's interpreter)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return python.parent.parent / "lib" / version / "site-packages"


async def _run(*argv: str) -> str:
    child = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.STDOUT)
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"{argv[:6]} exited {child.returncode}: {out.decode(errors='replace')[-2000:]}")
    return out.decode(errors="replace")
