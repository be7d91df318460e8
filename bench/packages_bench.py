"""Benchmark: the ``package:<dist>`` probe vs plain ``sha256sum`` over the same files, on a tier-2 host.

Needs root (it starts a namespace host, see tests/lab). Run: .venv/bin/python -m bench.packages_bench
Builds and installs (pip, offline) a generated distribution with --files modules of --kib KiB
each, then times, inside the host, the probe (RECORD read, every file hashed, package dirs
walked) and ``sha256sum`` over exactly the files RECORD lists; prints both and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bot.demo.wheel import make_env, pip_install, site_packages, write_source
from commands.checks.package import package_argv, parse_package
from commands.command_result import CommandResult
from tests.lab import require_root_netns
from tests.lab.common import Scenario
from tests.lab.netns import NetnsHost, NetnsLab

ENV = "/root/ml-env"


def timed(host: NetnsHost, argv: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    done = host.run(argv, timeout=600)
    return time.monotonic() - started, done.stdout


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--kib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reason = require_root_netns()
    if reason:
        print(f"skipped: {reason}")
        return 0
    block = ("# generated\n" + "x = 1\n" * 170) * (args.kib * 1024 // 1030 + 1)
    modules = {f"m{i:05d}.py": f"# {i}\n" + block for i in range(args.files)}
    with NetnsLab() as lab, tempfile.TemporaryDirectory() as scratch:
        lab.start(["ct160"], per_host={"ct160": Scenario()})
        host = lab["ct160"]
        assert isinstance(host, NetnsHost)
        python = await make_env(host.local_path(ENV), "/usr/bin/python3")
        await pip_install(python, "--no-compile", str(write_source(Path(scratch), "big-dist", "1.0", modules)))
        package = site_packages(python) / "big_dist"
        files = [f"{ENV}/{p.relative_to(host.local_path(ENV))}" for p in sorted(package.glob("*.py"))]
        total_mb = sum(p.stat().st_size for p in package.glob("*.py")) / 1e6
        probe, plain = [], []
        for _ in range(args.runs):
            seconds, out = timed(host, package_argv(f"{ENV}/bin/python", "big-dist"))
            probe.append(seconds)
            plain.append(timed(host, ["sha256sum", "--", *files])[0])
        finding = parse_package(f"{ENV}/bin/python", "big-dist", CommandResult("probe", 0, out.encode(), 0))
        assert finding.status == "pass", finding.summary
    p, s = statistics.median(probe), statistics.median(plain)
    print(f"{args.files} files, {total_mb:.0f} MB, median of {args.runs} (page cache warm after run 1):")
    print(f"  package probe   {p:.3f} s  ({finding.details['proven']} files proven)")
    print(f"  sha256sum       {s:.3f} s")
    print(f"  ratio probe / sha256sum = {p / s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
