"""Tier 1: ``package:<dist>`` end to end on the loopback host, against a real pip install under its root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml

from bot.demo.host import DIST, DemoHost, demo_host
from bot.demo.wheel import pip_install, write_source
from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import OperationResult, Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify

GOOD_FLAGS = ["--speculative-algorithm", "NEXTN"]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def host() -> AsyncIterator[DemoHost]:
    """A clean host whose env holds DIST (pristine) and an editable ``edit-me``."""
    async with demo_host("ct140", patched=False, extra_file=False, flags=GOOD_FLAGS, packages=True) as lab:
        assert lab.python is not None
        await pip_install(lab.python, "-e", str(write_source(lab.root / "src", "edit-me", "1.0", {"__init__.py": ""})))
        yield lab


async def run_verify(lab: DemoHost, tmp_path: Path, **packages: object) -> tuple[OperationResult, dict[str, Finding]]:
    document = lab.inventory()
    document["hosts"][lab.name]["packages"].update(packages)
    inventory = parse_inventory(yaml.safe_dump(document), "inv.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        result = await verify(VerifyPlan.for_host(inventory.host(lab.name), None), origin=Origin("cli:t", "cli"),
                              audit=audit)
    finally:
        audit.close()
    return result, {f.name: f for f in result.checks if f.name.startswith("package:")}


async def test_pristine_passes_editable_warns_absent_errors_in_the_first_round_trip(host: DemoHost,
                                                                                    tmp_path: Path) -> None:
    result, found = await run_verify(host, tmp_path, dists=[DIST, "Edit_Me", "not-there"])
    assert found[f"package:{DIST}"].status == "pass", found[f"package:{DIST}"].summary
    assert "sgl-kernel 0.1.4 (installer pip): 7 file(s) proven" in found[f"package:{DIST}"].summary
    assert found["package:edit-me"].status == "warn" and "editable install" in found["package:edit-me"].summary
    assert found["package:not-there"].status == "error"
    assert "not-there is not installed" in found["package:not-there"].summary
    # Three more probes, no more round trips: the service, hashes, listing and probes share the one.
    assert result.stats["exec_round_trips"] == 1


async def test_edited_added_and_deleted_files_each_fail(host: DemoHost, tmp_path: Path) -> None:
    module = host.dist_dir / "speculative.py"
    original = module.read_bytes()
    module.write_bytes(original.replace(b'"NEXTN"', b'"NEXTN", "DDTREE"'))
    try:
        edited = (await run_verify(host, tmp_path))[1][f"package:{DIST}"]
    finally:
        module.write_bytes(original)
    assert edited.status == "fail" and "sgl_kernel/speculative.py differs from RECORD: size 42 B (recorded 32 B)" \
        in edited.summary

    added = host.dist_dir / "ddtree_kernels.py"
    added.write_text("def build_tree():\n    return '!!!!!!!!'\n")
    try:
        extra = (await run_verify(host, tmp_path))[1][f"package:{DIST}"]
    finally:
        added.unlink()
    assert extra.status == "fail" and "sgl_kernel/ddtree_kernels.py is not listed in RECORD" in extra.summary

    init = host.dist_dir / "__init__.py"
    kept = init.read_bytes()
    init.unlink()
    try:
        deleted = (await run_verify(host, tmp_path))[1][f"package:{DIST}"]
    finally:
        init.write_bytes(kept)
    assert deleted.status == "fail" and deleted.details["missing"] == ["sgl_kernel/__init__.py"]

    assert (await run_verify(host, tmp_path))[1][f"package:{DIST}"].status == "pass"


async def test_a_symlink_out_of_the_package_fails_and_is_not_followed(host: DemoHost, tmp_path: Path) -> None:
    link = host.dist_dir / "escape"
    link.symlink_to(host.root / "keys")
    try:
        finding = (await run_verify(host, tmp_path))[1][f"package:{DIST}"]
    finally:
        link.unlink()
    assert finding.status == "fail" and "sgl_kernel/escape is a symlink to" in finding.summary
    assert finding.evidence is not None and "id_ed25519" not in finding.evidence.output


async def test_missing_interpreter_is_an_error(host: DemoHost, tmp_path: Path) -> None:
    missing = str(host.root / "no-env" / "bin" / "python")
    finding = (await run_verify(host, tmp_path, python=missing))[1][f"package:{DIST}"]
    assert finding.status == "error" and f"interpreter {missing} is missing" in finding.summary


async def test_a_same_size_edit_fails_though_the_size_matches_record(host: DemoHost, tmp_path: Path) -> None:
    module = host.dist_dir / "speculative.py"
    original = module.read_bytes()
    module.write_bytes(original.replace(b'"NEXTN"', b'"NEXTX"'))
    try:
        edited = (await run_verify(host, tmp_path))[1][f"package:{DIST}"]
    finally:
        module.write_bytes(original)
    assert len(original) == 32 and edited.status == "fail", edited.summary
    assert "sgl_kernel/speculative.py differs from RECORD: size 32 B (recorded 32 B)" in edited.summary
