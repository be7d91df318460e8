"""Restore into a container service, the pure side: where a live path is (a mount's host source, or the
container's own layer) from `inspect`'s Mounts as recorded from Docker 20.10, what is refused and why, and the
inventory's `into_container` key."""

from __future__ import annotations

import json

import pytest

from commands.command_result import CommandResult
from commands.errors import InventoryError
from commands.inventory import parse_inventory
from commands.restore.into_container import parse_mounts, place, refusal

# `docker inspect --format '{{json .State.Pid}}\n{{json .Mounts}}' bound`, Docker 20.10.24 (the lab's engine)
RECORDED = ('4242\n[{"Type":"bind","Source":"/var/tmp/lab/conf","Destination":"/opt/conf","Mode":"","RW":true,'
            '"Propagation":"rprivate"},{"Type":"volume","Name":"models","Source":"/var/lib/docker/volumes/models/_data",'
            '"Destination":"/models","Driver":"local","Mode":"z","RW":true,"Propagation":""},{"Type":"bind","Source":'
            '"/srv/app/fake_llm.py","Destination":"/srv/app/fake_llm.py","Mode":"","RW":false,"Propagation":'
            '"rprivate"},{"Type":"tmpfs","Source":"","Destination":"/run/cache","Mode":"","RW":true,"Propagation":""},'
            '{"Type":"bind","Source":"/var/tmp/lab/conf-sub","Destination":"/opt/conf/sub","Mode":"","RW":true,'
            '"Propagation":"rprivate"}]\n')
MOUNTS = parse_mounts(CommandResult("inspect", 0, RECORDED.encode(), 0.0)) or []


@pytest.mark.parametrize(("live", "host"), [
    ("/opt/conf/conf.py", "/var/tmp/lab/conf/conf.py"),  # below a bind-mounted dir
    ("/opt/conf/sub/x.py", "/var/tmp/lab/conf-sub/x.py"),  # the deepest mount holding it wins
    ("/opt/conf/../conf/conf.py", "/var/tmp/lab/conf/conf.py"),  # resolved lexically first
    ("/srv/app/fake_llm.py", "/srv/app/fake_llm.py"),  # a file mounted by itself
    ("/models/w.safetensors", "/var/lib/docker/volumes/models/_data/w.safetensors"),  # a volume is a host dir
    ("/opt/confx/conf.py", None),  # a sibling whose name starts the same: not under /opt/conf
    ("/opt/svc/spec.py", None),  # the container's own layer
    ("/run/cache/x", None),  # a tmpfs: nothing on the host
])
def test_a_live_path_is_placed_by_the_containers_mounts(live: str, host: str | None) -> None:
    assert place(live, MOUNTS).host_path == host


def test_no_mounts_and_unreadable_output() -> None:
    assert parse_mounts(CommandResult("inspect", 0, b"4242\n[]\n", 0.0)) == []
    assert parse_mounts(CommandResult("inspect", 0, b"4242\nnull\n", 0.0)) == []
    assert parse_mounts(CommandResult("inspect", 1, b"Error: No such object: ghost\n", 0.0)) is None


@pytest.mark.parametrize(("live", "into", "words"), [
    ("/opt/svc/spec.py", False, "spec.py: /opt/svc/spec.py is in container sglang's own layer: a restore there is "
                                "lost at the next recreate; rebuild or re-pull the image (or set into_container: "
                                "true on backup pre to write it there anyway)"),
    ("/run/cache/x", True,
     "/run/cache/x is on a tmpfs mount of container sglang: nothing on the host to restore it into"),
    ("/opt/conf/conf.py", False, None),
])
def test_what_is_refused_says_why(live: str, into: bool, words: str | None) -> None:
    assert refusal("spec.py", place(live, MOUNTS), "sglang", "pre", into) == words


def _inventory(manager: str, into: object) -> str:
    naming = "container: sglang" if manager == "docker" else "unit: sglang"
    return json.dumps({"hosts": {"ct129": {"address": "10.1.230.172", "service": {
        "manager": manager, "health_url": "http://127.0.0.1:30000/health", **dict([naming.split(": ")])},
        "backups": {"pre": {"dir": "/root/b", "files": {"spec.py": "/opt/svc/spec.py"}, "into_container": into}}}}})


def test_into_container_is_a_container_services_key() -> None:
    host = parse_inventory(_inventory("docker", True), "inventory.yml").host("ct129")
    assert host.backups["pre"].into_container is True
    with pytest.raises(InventoryError, match="backups pre: `into_container` is only for a container service"):
        parse_inventory(_inventory("systemd", True), "inventory.yml")
    with pytest.raises(InventoryError, match="into_container"):
        parse_inventory(_inventory("docker", "yes"), "inventory.yml")  # strict: a bool, not a word
