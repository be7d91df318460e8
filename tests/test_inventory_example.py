"""inventory.example.yml loads as a real inventory, and docs/inventory.md's Inventory block is the same text."""

from __future__ import annotations

import re

from commands.inventory import load_inventory
from tests.conftest import REPO

EXAMPLE = REPO / "inventory.example.yml"


def test_the_example_inventory_loads_with_every_section() -> None:
    inventory = load_inventory(EXAMPLE)
    host = inventory.host("ct129")
    assert host.service is not None and host.service.probe is not None and "pre-ddtree" in host.backups
    assert host.packages is not None and "sgl-kernel" in host.packages.dists
    assert host.packages.deb == ["nginx", "openssh-server"]
    assert inventory.approvals.approvers and inventory.channels


def test_readme_shows_the_example_as_it_is() -> None:
    readme = (REPO / "docs" / "inventory.md").read_text()
    block = re.search(r"# Inventory\n.*?```yaml\n(.*?)```", readme, re.S)
    assert block is not None
    example = "".join(line for line in EXAMPLE.read_text().splitlines(keepends=True) if not line.startswith("# "))
    assert block.group(1) == example
