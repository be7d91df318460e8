"""README is the two-minute read: short, its one-host inventory loads, and every page it links exists."""

from __future__ import annotations

import re

import yaml

from commands.inventory import parse_inventory
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def test_readme_is_short_and_names_the_two_commands() -> None:
    assert len(README.splitlines()) <= 160  # the details live in docs/
    assert "scripts/demo" in README and "scripts/test" in README


def test_readme_one_host_inventory_loads_and_is_ten_lines() -> None:
    block = re.search(r"## One host\n.*?```yaml\n(.*?)```", README, re.S)
    assert block is not None
    assert len(block.group(1).splitlines()) <= 10
    inventory = parse_inventory(block.group(1), "README.md")
    host = inventory.host("ct129")
    assert host.service is not None and "pre-ddtree" in host.backups
    assert yaml.safe_load(block.group(1))["hosts"]["ct129"]["address"] == "10.1.230.172"


def test_every_local_link_in_readme_exists() -> None:
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert "docs/index.md" in targets
    assert [target for target in targets if not (REPO / target).exists()] == []
