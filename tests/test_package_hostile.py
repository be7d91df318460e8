"""Tier 1: ``package:<dist>`` against hostile edits of real pip installs, through a real verify on the loopback host.

Symlinks planted in the dist-info and the package dirs with forged RECORD rows (the guess
oracle: never a digest or size of a file outside the environment), and console scripts pip
wrote, then edited: only an installer's own ``#!`` header rewritten warns, anything else fails.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml

from bot.demo.host import DIST, DIST_MODULES, DIST_VERSION, DemoHost, demo_host
from bot.demo.wheel import make_env, pip_install, site_packages, write_source
from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify

SCRIPT = "sgl-tool"
SECRET = b"root-only: proofbot must never tell what this holds\n"
INFO = f"{DIST.replace('-', '_')}-{DIST_VERSION}.dist-info"


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def host() -> AsyncIterator[DemoHost]:
    """A clean host whose env holds DIST with a console script, pip-installed; a root-only dir beside it."""
    async with demo_host("ct141", patched=False, extra_file=False, packages=True) as lab:
        assert lab.python is not None
        await pip_install(lab.python, "--force-reinstall", str(with_script(lab.root / "src-script")))
        secret_dir = lab.root / "root-only"
        secret_dir.mkdir(mode=0o700)
        (secret_dir / "secret").write_bytes(SECRET)
        (secret_dir / "secret").chmod(0o600)
        yield lab


def with_script(root: Path) -> Path:
    return write_source(root, DIST, DIST_VERSION, {**DIST_MODULES, "cli.py": "def main():\n    return 0\n"},
                        scripts={SCRIPT: "sgl_kernel.cli:main"})


async def package_finding(lab: DemoHost, tmp_path: Path, python: Path | None = None) -> Finding:
    document = lab.inventory()
    document["hosts"][lab.name]["packages"]["python"] = str(python or lab.python)
    inventory = parse_inventory(yaml.safe_dump(document), "inv.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        result = await verify(VerifyPlan.for_host(inventory.host(lab.name), None), origin=Origin("cli:t", "cli"),
                              audit=audit)
    finally:
        audit.close()
    assert result.stats["exec_round_trips"] == 1
    return next(f for f in result.checks if f.name == f"package:{DIST}")


def said(finding: Finding) -> str:
    """Everything the finding shows anyone: summary, evidence and details."""
    assert finding.evidence is not None
    return f"{finding.summary}\n{finding.evidence.output}\n{finding.details}"


def leaked(finding: Finding, guessed: str) -> list[str]:
    """The secret's digests (hex as summaries cut it, urlsafe base64 as RECORD writes it) that the finding
    shows beyond the owner's own guess in RECORD."""
    raw = hashlib.sha256(SECRET).digest()
    shown = said(finding).replace(guessed.partition(",")[0], "")
    digests = (raw.hex()[:12], base64.urlsafe_b64encode(raw).decode().rstrip("="))
    return [digest for digest in digests if digest in shown]


class Forged:
    """A RECORD row appended (and taken out again), as the environment's owner could write it."""

    def __init__(self, lab: DemoHost, row: str) -> None:
        assert lab.python is not None
        self.record = site_packages(lab.python) / INFO / "RECORD"
        self.kept = self.record.read_bytes()
        self.record.write_bytes(self.kept + row.encode() + b"\n")

    def undo(self) -> None:
        self.record.write_bytes(self.kept)


def guess(size: int | None = None) -> str:
    """A RECORD hash and size field for the secret: the right guess unless a size is given."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(SECRET).digest()).decode().rstrip("=")
    return f"sha256={digest},{size if size is not None else len(SECRET)}"


async def test_a_dist_info_link_to_a_root_only_dir_is_a_finding_and_tells_nothing_of_what_is_behind(
        host: DemoHost, tmp_path: Path) -> None:
    assert host.python is not None
    proven = (await package_finding(host, tmp_path)).details["proven"]
    link = site_packages(host.python) / INFO / "cache"
    link.symlink_to(host.root / "root-only")
    wrong = base64.urlsafe_b64encode(hashlib.sha256(b"a wrong guess").digest()).decode().rstrip("=")
    for hashed in (guess(), f"sha256={wrong},7"):  # the right guess must not be confirmed, a wrong one not corrected
        forged = Forged(host, f"{INFO}/cache/secret,{hashed}")
        try:
            finding = await package_finding(host, tmp_path)
        finally:
            forged.undo()
        assert finding.status == "fail", finding.summary
        assert f"{INFO}/cache/secret is reached through the symlink" in finding.summary
        assert f"-> '{host.root}/root-only'" in finding.summary and "not followed" in finding.summary
        assert finding.details["proven"] == proven  # the forged row is not among them
        assert leaked(finding, hashed) == []
        assert f"'size': {len(SECRET)}" not in said(finding) and f'"size": {len(SECRET)}' not in said(finding)
    link.unlink()
    assert (await package_finding(host, tmp_path)).status == "pass"


async def test_a_link_in_a_package_dir_and_a_row_through_it_are_findings_never_followed(
        host: DemoHost, tmp_path: Path) -> None:
    assert host.python is not None
    link = site_packages(host.python) / "sgl_kernel" / "vendor"
    link.symlink_to(host.root / "root-only")
    forged = Forged(host, f"sgl_kernel/vendor/secret,{guess()}")
    try:
        finding = await package_finding(host, tmp_path)
    finally:
        forged.undo()
        link.unlink()
    assert finding.status == "fail"
    assert (f"sgl_kernel/vendor/secret is reached through the symlink {link} -> '{host.root}/root-only': "
            "not followed") in finding.summary
    unlisted = {item["path"]: item["why"] for item in finding.details["unlisted"]}
    assert unlisted == {"sgl_kernel/vendor": f"is a symlink to '{host.root}/root-only' that RECORD does not list: "
                                             "not followed"}
    assert leaked(finding, guess()) == []


async def test_a_row_climbing_out_of_the_environment_is_not_read(host: DemoHost, tmp_path: Path) -> None:
    forged = Forged(host, f"../../../../root-only/secret,{guess()}")
    try:
        finding = await package_finding(host, tmp_path)
    finally:
        forged.undo()
    assert finding.status == "warn" and "resolves outside the environment: not read" in finding.summary
    assert leaked(finding, guess()) == []


async def test_an_environment_reached_through_a_symlink_is_refused_by_name(host: DemoHost, tmp_path: Path) -> None:
    assert host.python is not None
    alias = host.root / "env-alias"
    alias.symlink_to(host.python.parent.parent)
    try:
        finding = await package_finding(host, tmp_path, alias / "bin" / "python")
    finally:
        alias.unlink()
    assert finding.status == "error"
    assert f"reached through the symlink {alias} -> '{host.python.parent.parent}'" in finding.summary


async def test_console_script_pristine_passes_an_installer_header_warns_anything_else_fails(
        host: DemoHost, tmp_path: Path) -> None:
    assert host.python is not None
    script = host.python.parent / SCRIPT
    pristine = script.read_bytes()
    assert pristine.startswith(f"#!{host.python}\n".encode()), "pip writes the env's interpreter"
    assert (await package_finding(host, tmp_path)).status == "pass"
    body = pristine.split(b"\n", 1)[1]
    cases = {
        "installer header": (b"#!/usr/bin/env python3\n" + body, "warn"),
        "wheel's #!python": (b"#!python\n" + body, "warn"),
        "a line inserted, #! untouched": (pristine.replace(b"import sys\n", b"import sys\nimport os\n"), "fail"),
        "another interpreter": (b"#!/tmp/evil/python\n" + body, "fail"),
        "installer header and a changed body": (b"#!/usr/bin/env python3\n" + body + b"print(1)\n", "fail"),
    }
    found: dict[str, Finding] = {}
    try:
        for case, (text, status) in cases.items():
            script.write_bytes(text)
            found[case] = await package_finding(host, tmp_path)
            assert found[case].status == status, (case, found[case].summary)
            if status == "warn":
                assert "the rest byte for byte as RECORD says" in found[case].summary, case
            else:
                assert f"../../../bin/{SCRIPT} differs from RECORD" in found[case].summary, case
    finally:
        script.write_bytes(pristine)
    assert "its #! header '#!/tmp/evil/python' is not one an installer writes" in found["another interpreter"].summary


async def test_a_long_environment_path_gets_distlibs_sh_header_and_is_judged_the_same(
        host: DemoHost, tmp_path: Path) -> None:
    """pip (distlib) writes ``#!/bin/sh`` + ``'''exec' <python> "$0" "$@"`` when the path passes 127 bytes."""
    python = await make_env(host.root / ("long-" + "x" * 130) / "env")
    await pip_install(python, str(with_script(host.root / "src-long")))
    script = python.parent / SCRIPT
    pristine = script.read_bytes()
    assert pristine.startswith(f"#!/bin/sh\n'''exec' {python} \"$0\" \"$@\"\n' '''".encode())
    assert (await package_finding(host, tmp_path, python)).status == "pass"
    body = pristine.split(b"\n' '''", 1)[1]
    script.write_bytes(b"#!/usr/bin/env python3\n" + body)
    assert (await package_finding(host, tmp_path, python)).status == "warn"
    script.write_bytes(pristine.replace(b"import sys\n", b"import sys\nimport os\n"))
    assert (await package_finding(host, tmp_path, python)).status == "fail"


async def test_a_site_packages_that_is_a_symlink_is_not_followed_and_is_named(host: DemoHost, tmp_path: Path) -> None:
    assert host.python is not None
    site = site_packages(host.python)
    real = site.with_name("site-real")
    site.rename(real)
    site.symlink_to(real)
    try:
        finding = await package_finding(host, tmp_path)
    finally:
        site.unlink()
        real.rename(site)
    assert finding.status == "error"
    assert finding.summary == (f"{DIST} is not installed in the environment of {host.python} (symlinks in its "
                               f"layout, not followed: {site} -> '{real}')")
