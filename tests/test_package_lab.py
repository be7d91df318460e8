"""Tier 2: ``package:<dist>`` over OpenSSH on a namespace host, against a real venv in the host's own /root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.demo.wheel import make_env, pip_install, site_packages, write_source
from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.common import Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab

ENV = "/root/ml-env"
# The host's /root is its own (a bind mount): the venv's interpreter must live outside it.
BASE_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct150": Scenario()}) as started:
        yield started


async def package_finding(lab: NetnsLab, tmp_path: Path) -> tuple[Finding, int]:
    document = lab.inventory()
    document["hosts"]["ct150"]["packages"] = {"python": f"{ENV}/bin/python", "dists": ["sgl-kernel"]}
    inventory = parse_inventory(yaml.safe_dump(document), "inv.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        result = await verify(VerifyPlan.for_host(inventory.host("ct150"), None), origin=Origin("cli:t", "cli"),
                              audit=audit)
    finally:
        audit.close()
    return next(f for f in result.checks if f.name == "package:sgl-kernel"), result.stats["exec_round_trips"]


@pytest.mark.tier2
async def test_real_venv_on_an_openssh_host_passes_then_fails_when_patched(lab: NetnsLab, tmp_path: Path) -> None:
    local_env = lab["ct150"].local_path(ENV)
    python = await make_env(local_env, BASE_PYTHON)
    source = write_source(tmp_path, "sgl-kernel", "0.1.4", {"__init__.py": "", "speculative.py": "A = 1\n"})
    await pip_install(python, str(source))

    pristine, round_trips = await package_finding(lab, tmp_path)
    assert pristine.status == "pass", pristine.summary
    assert "sgl-kernel 0.1.4 (installer pip)" in pristine.summary and round_trips == 1
    assert pristine.evidence is not None and f'"prefix": "{ENV}"' in pristine.evidence.output

    package = site_packages(python) / "sgl_kernel"
    (package / "speculative.py").write_text("A = 2\n")
    (package / "ddtree_utils.py").write_text("def build_tree():\n    return '!!!!!!!!'\n")
    patched, _ = await package_finding(lab, tmp_path)
    assert patched.status == "fail"
    assert "sgl_kernel/speculative.py differs from RECORD" in patched.summary
    assert "sgl_kernel/ddtree_utils.py is not listed in RECORD" in patched.summary
    assert f"{ENV}/bin/python -m pip install --force-reinstall --no-deps sgl-kernel==0.1.4" in patched.summary
