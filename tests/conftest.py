"""Shared fixtures: the loopback lab host, inventory files and a CLI runner; and a collection-time check
that every test which starts a lab (tier 2 namespaces, tier 3 systemd-nspawn) carries its tier's marker."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, _lay_out_files, demo_host
from tests.lab.image import image_ready
from tests.store_backends import pg_cluster, pg_database, pg_url, store_target  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parent.parent
CLI_TIMEOUT_S = 120


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str


async def run_cli(*args: str, env: dict[str, str] | None = None) -> CliRun:
    """Run the real ``proofbot`` entry point in a subprocess, as a user would."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", *args, cwd=REPO,
        env={**os.environ, **(env or {})},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(CLI_TIMEOUT_S):
        out, err = await child.communicate()
    return CliRun(child.returncode if child.returncode is not None else -1, out.decode(), err.decode())


def write_inventory(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def via_port(host: DemoHost, port: int, tmp_path: Path, document: dict[str, Any] | None = None) -> dict[str, Any]:
    """The host's inventory reaching it through 127.0.0.1:port (a DelayProxy), its key known there too."""
    document = document or host.inventory()
    document["hosts"][host.name]["port"] = port
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} " + host.known_hosts.read_text().split(" ", 1)[1])
    document["ssh"]["known_hosts"] = str(known)
    return document


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def seeded_host() -> AsyncIterator[DemoHost]:
    """A loopback host in the seed's broken state: patched file, extra file, forbidden flag."""
    async with demo_host("ct129") as host:
        yield host


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def clean_host() -> AsyncIterator[DemoHost]:
    """A loopback host where everything matches the backup and the flags are right."""
    async with demo_host("ct130", patched=False, extra_file=False,
                         flags=["--speculative-algorithm", "NEXTN"]) as host:
        yield host


def fresh(host: DemoHost, *, patched: bool = True, extra_file: bool = True) -> DemoHost:
    """A module's host with its files as demo_host lays them out (the seed's broken state unless told otherwise):
    whatever an earlier test restored, edited, planted or snapshotted is gone; its sshd and service run on
    untouched. Cheaper than a new host per test."""
    for path in host.root.iterdir():
        if path.name not in ("keys", "supervisor"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    _lay_out_files(host.root, patched=patched, extra_file=extra_file)
    return host


# What in a test's or fixture's own source starts (or requires) a lab of each tier.
LAB_TIERS = {
    "tier3": re.compile(r"\bNspawnLab\b|\brequire_nspawn\("),
    "tier2": re.compile(r"\bNetnsLab\b|\bBastionLab\b|\brunning_bastion_lab\(|\brequire_root_netns\("),
}


@functools.cache
def _tiers_started_by(func: Callable[..., Any]) -> frozenset[str]:
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return frozenset()
    return frozenset(tier for tier, starts in LAB_TIERS.items() if starts.search(source))


def lab_tiers(item: pytest.Item) -> set[str]:
    """The tiers whose labs this test starts: in its own body or in any fixture it uses (transitively)."""
    function = getattr(item, "function", None)
    funcs = [function] if function is not None else []
    info = getattr(item, "_fixtureinfo", None)
    for definitions in (info.name2fixturedefs.values() if info is not None else ()):
        funcs.extend(definition.func for definition in definitions)
    return {tier for func in funcs for tier in _tiers_started_by(func)}


# A cold cache (a fresh clone) builds the tier-3 image (debootstrap, its own 1800 s bound) in the setup of the
# first tier-3 test, or waits on its lock while another worker builds: on a loaded machine that passed the
# 300 s per-test bound. While the image is not built, tier-3 tests get this much more.
IMAGE_BUILD_ALLOWANCE_S = 1800


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A lab test without its tier's marker would run (or be skipped) unnoticed by `-m tier2` selections
    and by CI's per-tier accounting: refuse to collect it, naming the test and the marker it needs."""
    unmarked = [f"{item.nodeid}: needs @pytest.mark.{tier}" for item in items
                for tier in sorted(lab_tiers(item)) if item.get_closest_marker(tier) is None]
    if unmarked:
        raise pytest.UsageError("tests that start a lab must carry their tier's marker:\n  " + "\n  ".join(unmarked))
    tier3 = [item for item in items if item.get_closest_marker("tier3") is not None]
    if tier3 and not image_ready():
        for item in tier3:
            marked = item.get_closest_marker("timeout")
            bound = float(marked.args[0]) if marked is not None and marked.args else float(config.getini("timeout"))
            item.add_marker(pytest.mark.timeout(bound + IMAGE_BUILD_ALLOWANCE_S))


_LEAK_REPORT: list[str] = []


@pytest.fixture(autouse=True, scope="module")
def _garbage_collected_between_modules(request: pytest.FixtureRequest) -> None:
    """Collect the previous module's cyclic garbage before this module runs. A socket an earlier module left
    unclosed inside a reference cycle is otherwise found by whichever later test the collector happens to run
    in (two CI runs failed an unrelated lab test on one from 127.0.0.1): here it is said on stderr, naming the
    module before and, under ``PYTHONTRACEMALLOC=20``, where the socket was made; it does not fail a module that
    did not leak it. Leaks freed at once (no cycle) still fail the test that made them, as every warning does."""
    import gc
    import tracemalloc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    before = _LEAK_REPORT[-1] if _LEAK_REPORT else "(session start)"
    for found in caught:
        if not issubclass(found.category, ResourceWarning):
            warnings.warn_explicit(found.message, found.category, found.filename, found.lineno, source=found.source)
            continue
        made = tracemalloc.get_object_traceback(found.source) if found.source is not None else None
        where = "\n  made at:\n    " + "\n    ".join(made.format()) if made else ""
        print(f"proofbot tests: collected before {request.node.name}, left by a module before it "
              f"(last was {before}): {found.message}{where}", file=sys.__stderr__)
    _LEAK_REPORT.append(request.node.name)
