"""Writes the ``package:<dist>`` recordings that tests/test_package_parser.py judges: real pip installs, edited.

Run as root (it chowns an environment to uid 65534): ``.venv/bin/python -m tests.package_recordings``.
Each case is a real venv under /tmp/pkgt2, a real pip install of the lab's small dist, an edit as a
hostile owner would make it, and the real guard + probe run on it (``package_argv``); the output is
written to tests/recorded/ as it came.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from bot.demo.wheel import make_env, pip_install, site_packages, write_source
from commands.checks.package import PROBE_SOURCE, package_argv
from commands.checks.package_guard import SCRIPT_TEXT

ROOT = Path("/tmp/pkgt2")
RECORDED = Path(__file__).parent / "recorded"
INFO = "sgl_kernel-0.1.4.dist-info"
NOBODY = 65534
MODULES = {"__init__.py": "def main():\n    return 0\n", "speculative.py": "A = 1\n"}


def install(name: str, modules: dict[str, str] | None = None) -> Path:
    return asyncio.run(_install(name, modules))


async def _install(name: str, modules: dict[str, str] | None) -> Path:
    python = await make_env(ROOT / name, "/usr/bin/python3")
    source = write_source(ROOT / f"src-{name}", "sgl-kernel", "0.1.4", modules or MODULES,
                          {"sgl-tool": "sgl_kernel:main"})
    await pip_install(python, str(source))
    return python


def record(name: str, python: Path, argv: list[str] | None = None) -> None:
    done = subprocess.run(argv or package_argv(str(python), "sgl-kernel"), capture_output=True, check=False)
    (RECORDED / name).write_bytes(done.stdout + done.stderr)
    print(name, done.returncode)


def b64(data: bytes, algorithm: str = "sha256") -> str:
    return base64.urlsafe_b64encode(hashlib.new(algorithm, data).digest()).decode().rstrip("=")


def append_rows(python: Path, *rows: str) -> None:
    record_file = site_packages(python) / INFO / "RECORD"
    record_file.write_text(record_file.read_text() + "".join(row + "\n" for row in rows))


def main() -> None:
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(mode=0o755)
    secret = ROOT / "root-only" / "secret"
    secret.parent.mkdir(mode=0o700)
    secret.write_bytes(b"TOP-SECRET-LINE\n")
    secret.chmod(0o600)

    # Odd RECORD rows, and the console script's #! rewritten to another installer form.
    odd = {**MODULES, "a,b.py": "A = 1\n", "new\nline.py": "B = 1\n", "x.py": "X = 1\n", "bad.py": "BAD = 1\n",
           "nohash.py": "NOHASH = 1\n", "old.py": "OLD = 1\n"}
    python = install("ml-odd", odd)
    record_file = site_packages(python) / INFO / "RECORD"
    with record_file.open(newline="") as handle:
        rows = list(csv.reader(handle))
    for row in rows:
        if row[0] == "sgl_kernel/x.py":
            row[1:] = [f"sha512={b64(odd['x.py'].encode(), 'sha512')}", "6"]
        elif row[0] == "sgl_kernel/bad.py":
            row[1] = "sha256=!!not*base64"
        elif row[0] == "sgl_kernel/nohash.py":
            row[1] = ""
        elif row[0] == "sgl_kernel/old.py":
            row[1] = "md5=1B2M2Y8AsgTpgAmY7PhCfg"
    # The lab backend writes its wheel's RECORD unquoted: the two odd names are written again, quoted by csv.
    site = site_packages(python)
    rows = [row for row in rows if (site / row[0]).exists()]
    rows += [[f"sgl_kernel/{name}", f"sha256={b64(odd[name].encode())}", str(len(odd[name]))]
             for name in ("a,b.py", "new\nline.py")]
    rows += [["/etc/hostname", f"sha256={b64(b'')}", "0"], ["sgl_kernel/two-fields.py", f"sha256={b64(b'')}"]]
    with record_file.open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    script = python.parent / "sgl-tool"
    script.write_bytes(b"#!/usr/bin/env python3\n" + script.read_bytes().split(b"\n", 1)[1])
    record("package_odd_record.jsonl", python)

    # A line inserted in the console script, its #! line untouched.
    python = install("ml-script")
    script = python.parent / "sgl-tool"
    script.write_bytes(script.read_bytes().replace(b"import sys\n", b"import sys\nimport os\n"))
    record("package_script_changed.jsonl", python)

    # Links: <dist-info>/cache -> a root-only dir, a package dir link, forged rows through both.
    python = install("ml-links")
    (site_packages(python) / INFO / "cache").symlink_to(secret.parent)
    (site_packages(python) / "sgl_kernel" / "vendor").symlink_to(secret.parent)
    guess = f"sha256={b64(secret.read_bytes())},{len(secret.read_bytes())}"
    append_rows(python, f"{INFO}/cache/secret,{guess}", f"sgl_kernel/vendor/secret,{guess}")
    record("package_links.jsonl", python)

    # The environment owned by a service account: a pass that says who can rewrite RECORD.
    python = install("ml-owned")
    subprocess.run(["chown", "-R", "-h", f"{NOBODY}:{NOBODY}", str(ROOT / "ml-owned")], check=True)
    record("package_owned.jsonl", python)
    # ... and a root-only file hard-linked into it (a root could; protected_hardlinks stops others).
    os.link(secret, site_packages(python) / "sgl_kernel" / "cache.py")
    append_rows(python, f"sgl_kernel/cache.py,{guess}")
    (site_packages(python) / INFO / "INSTALLER").unlink()  # a file the probe prints the text of
    os.link(secret, site_packages(python) / INFO / "INSTALLER")
    record("package_hardlink.jsonl", python)

    # The environment named through a symlink.
    (ROOT / "alias").symlink_to(ROOT / "ml-script")
    record("package_path_link.jsonl", ROOT / "alias" / "bin" / "python")

    # No usable interpreter: a python3.11 that the service account owns, and none at the second place.
    fake = ROOT / "opt" / "bin" / "python3.11"
    fake.parent.mkdir(parents=True)
    shutil.copy("/usr/bin/python3.11", fake)
    os.chown(fake, NOBODY, NOBODY)
    guard = SCRIPT_TEXT.replace("/usr/bin/python3 /usr/local/bin/python3", f"{fake} /usr/local/bin/python3")
    record("package_guard_refused.txt", python,
           ["sh", "-c", guard, "proofbot-package", PROBE_SOURCE, str(python), "sgl-kernel"])


if __name__ == "__main__":
    main()
