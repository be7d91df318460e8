"""ssh.jump as written in the inventory: every accepted form, the hops it resolves to, and bad input named by key."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from commands.errors import InventoryError
from commands.inventory import Inventory, parse_inventory


def inventory(ssh: dict[str, Any], hosts: dict[str, Any]) -> Inventory:
    return parse_inventory(yaml.safe_dump({"ssh": ssh, "hosts": hosts}), "inv.yml")


def hops(inv: Inventory, name: str) -> list[tuple[str, str, int, str]]:
    return [(hop.name, hop.address, hop.port, hop.ssh.user) for hop in inv.host(name).ssh.jump]


@pytest.mark.parametrize(("written", "expected"), [
    ("10.0.0.1", [("10.0.0.1", "10.0.0.1", 22, "root")]),
    ("ops@bastion.example", [("ops@bastion.example", "bastion.example", 22, "ops")]),
    ("bastion.example:2222", [("bastion.example:2222", "bastion.example", 2222, "root")]),
    ("ops@10.0.0.1:2222", [("ops@10.0.0.1:2222", "10.0.0.1", 2222, "ops")]),
    ("[2001:db8::1]:2222", [("[2001:db8::1]:2222", "2001:db8::1", 2222, "root")]),
    ("2001:db8::1", [("2001:db8::1", "2001:db8::1", 22, "root")]),
    ("a.example,ops@b.example:2200", [("a.example", "a.example", 22, "root"),
                                      ("ops@b.example:2200", "b.example", 2200, "ops")]),
    (["a.example", "b.example"], [("a.example", "a.example", 22, "root"), ("b.example", "b.example", 22, "root")]),
    ([], []),
])
def test_each_form_of_a_hop(written: object, expected: list[tuple[str, str, int, str]]) -> None:
    inv = inventory({}, {"gpu1": {"address": "10.1.0.1", "ssh": {"jump": written}}})
    assert hops(inv, "gpu1") == expected


def test_an_inventory_host_as_hop_brings_its_own_address_port_and_login() -> None:
    inv = inventory({"jump": "bastion", "known_hosts": "/etc/kh"}, {
        "bastion": {"address": "10.0.0.1", "port": 2222,
                    "ssh": {"user": "ops", "known_hosts": "/etc/bastion_kh", "client_keys": ["/k/ops"]}},
        "gpu1": {"address": "10.1.0.1"},
        "gpu2": {"address": "10.1.0.2", "ssh": {"jump": "admin@bastion"}},
        "edge": {"address": "10.2.0.1", "ssh": {"jump": []}},
    })
    (hop,) = inv.host("gpu1").ssh.jump
    assert (hop.name, hop.address, hop.port, hop.ssh.user) == ("bastion", "10.0.0.1", 2222, "ops")
    assert (hop.ssh.known_hosts, hop.ssh.client_keys) == ("/etc/bastion_kh", ["/k/ops"])
    assert hops(inv, "gpu2") == [("admin@bastion", "10.0.0.1", 2222, "admin")]
    assert inv.host("bastion").ssh.jump == ()  # never jumps through itself
    assert inv.host("edge").ssh.jump == ()  # a host may opt out of the default
    # An address hop is checked against the host's own known_hosts file.
    other = inventory({"known_hosts": "/etc/kh"}, {"gpu1": {"address": "10.1.0.1", "ssh": {"jump": "j.example"}}})
    assert other.host("gpu1").ssh.jump[0].ssh.known_hosts == "/etc/kh"


@pytest.mark.parametrize(("written", "said"), [
    ("x:0", "hop 'x:0': the port must be 1-65535"),
    ("x:65536", "hop 'x:65536': the port must be 1-65535"),
    ("x:", "hop 'x:': the port must be 1-65535"),
    ("Root@x", "not a valid user name in hop 'Root@x'"),
    ("[2001:db8::1", "hop '[2001:db8::1' is not `host`, `user@host:port` or `[v6]:port`"),
    ("a b", "hop 'a b' is not `host`"),
    ("a,,b", "hop '' is not `host`"),
    ({"host": "x"}, "a hop (`bastion`, `user@host:port`), `a,b` for a chain, or a list of hops"),
    ([1], "a hop (`bastion`, `user@host:port`), `a,b` for a chain, or a list of hops"),
    ("a,b,c,d,e,f,g,h,i", "at most 8 hops, got 9"),
    ("j.example,j.example", "a hop is listed twice in gpu1's chain"),
])
def test_bad_hops_are_refused_naming_the_key(written: object, said: str) -> None:
    with pytest.raises(InventoryError) as caught:
        inventory({}, {"gpu1": {"address": "10.1.0.1", "ssh": {"jump": written}}})
    assert re.match(r"inv\.yml:\d+: hosts\.gpu1\.ssh\.jump: ", str(caught.value)), caught.value
    assert said in str(caught.value)
    with pytest.raises(InventoryError) as in_defaults:
        inventory({"jump": written}, {"gpu1": {"address": "10.1.0.1"}})
    assert re.match(r"inv\.yml:\d+: ssh\.jump: ", str(in_defaults.value)) and said in str(in_defaults.value)


def test_limits_default_to_stock_sshd_and_are_validated() -> None:
    inv = inventory({}, {"gpu1": {"address": "10.1.0.1"}, "gpu2": {"address": "10.1.0.2",
                                                                   "ssh": {"max_sessions": 1}}})
    assert (inv.host("gpu1").ssh.max_startups, inv.host("gpu1").ssh.max_sessions) == (10, 10)
    assert inv.host("gpu2").ssh.max_sessions == 1
    with pytest.raises(InventoryError, match=r"inv\.yml:\d+: ssh\.max_startups: Input should be greater than"):
        inventory({"max_startups": 0}, {"gpu1": {"address": "10.1.0.1"}})
    with pytest.raises(InventoryError, match=r"inv\.yml:\d+: hosts\.gpu1\.ssh\.max_sessions: Input should be"):
        inventory({}, {"gpu1": {"address": "10.1.0.1", "ssh": {"max_sessions": "many"}}})


def test_an_address_hop_is_looked_up_by_its_own_address_not_the_hosts_host_key_alias() -> None:
    """`ssh -o HostKeyAlias=gpu -J j.example gpu` starts the hop as `ssh j.example`: no alias passed on."""
    inv = inventory({}, {"gpu1": {"address": "10.1.0.1",
                                  "ssh": {"jump": "j.example", "host_key_alias": "gpu-alias"}}})
    assert inv.host("gpu1").ssh.host_key_alias == "gpu-alias"
    assert inv.host("gpu1").ssh.jump[0].ssh.host_key_alias is None
