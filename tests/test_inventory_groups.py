"""Groups: a group names hosts or groups, `all` is implicit, and bad groups are refused at load."""

from __future__ import annotations

import re

import pytest

from commands.errors import InventoryError, UnknownHost
from commands.inventory import parse_inventory

HOSTS = """
hosts:
  ct129: {address: 10.1.230.172}
  ct130: {address: 10.1.230.173}
  ct131: {address: 10.1.230.174}
"""


def _load(groups: str, hosts: str = HOSTS) -> object:
    return parse_inventory(groups + hosts, "inv.yml")


def test_groups_expand_through_groups_in_written_order_each_host_once() -> None:
    inventory = parse_inventory("""
groups:
  gpu-west: [ct130, ct129]
  inference: [gpu-west, ct131, ct129]
fleet: {max_parallel: 8, host_deadline_s: 30, restart_batch: 2}
""" + HOSTS, "inv.yml")
    assert inventory.groups["gpu-west"] == ("ct130", "ct129")
    assert inventory.groups["inference"] == ("ct130", "ct129", "ct131")
    assert inventory.groups["all"] == ("ct129", "ct130", "ct131")
    assert [h.name for h in inventory.targets(["ct131", "gpu-west", "ct130"])] == ["ct131", "ct130", "ct129"]
    assert (inventory.fleet.max_parallel, inventory.fleet.host_deadline_s, inventory.fleet.restart_batch) == (8, 30, 2)


def test_fleet_defaults() -> None:
    inventory = parse_inventory(HOSTS, "inv.yml")
    fleet = inventory.fleet
    assert (fleet.max_parallel, fleet.host_deadline_s, fleet.restart_batch) == (32, 120, 1)
    assert inventory.groups == {"all": ("ct129", "ct130", "ct131")}


@pytest.mark.parametrize(("groups", "key", "words"), [
    ("groups: {a: [ct129, nope]}", "groups.a[1]", "unknown host or group 'nope'"),
    ("groups: {a: [b], b: [c], c: [a]}", "groups.", "cycle: a -> b -> c -> a"),
    ("groups: {a: [a]}", "groups.a", "cycle: a -> a"),
    ("groups: {ct129: [ct130]}", "groups.ct129", "may not share a name"),
    ("groups: {all: [ct130]}", "groups.all", "implicit"),
    ("groups: {'bad name': [ct130]}", "groups.bad name", "letters, digits"),
    ("fleet: {max_parallel: 0}", "fleet.max_parallel", "greater than or equal to 1"),
    ("fleet: {host_deadline_s: -1}", "fleet.host_deadline_s", "greater than 0"),
    ("fleet: {parallel: 4}", "fleet.parallel", "not an inventory key"),
])
def test_bad_groups_are_refused_with_the_key(groups: str, key: str, words: str) -> None:
    with pytest.raises(InventoryError) as raised:
        _load(groups + "\n")
    assert re.search(rf"inv\.yml:\d+: {re.escape(key)}", str(raised.value)) and words in str(raised.value)


def test_a_host_named_all_is_refused() -> None:
    with pytest.raises(InventoryError, match=r"hosts\.all: 'all' is the implicit group"):
        parse_inventory("hosts:\n  all: {address: 10.0.0.1}\n", "inv.yml")


def test_unknown_target_lists_hosts_and_groups_and_a_group_is_not_one_host() -> None:
    inventory = parse_inventory("groups: {gpu-west: [ct129, ct130]}\n" + HOSTS, "inv.yml")
    with pytest.raises(UnknownHost) as raised:
        inventory.targets(["ct129", "gpu-east"])
    assert "gpu-east" in str(raised.value) and "groups: all, gpu-west" in raised.value.hint
    with pytest.raises(UnknownHost, match=r"'gpu-west' is a group of 2 hosts; this command takes one host"):
        inventory.host("gpu-west")
