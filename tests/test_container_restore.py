"""Restore into a container service, the pure side: where a live path is (a mount's host source, or the
container's own layer) from `inspect`'s Mounts as recorded from Docker 20.10, what is refused and why, and the
inventory's `into_container` key."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from commands.checks.container_probe import copy_out, describe, write
from commands.checks.package_probe_fs import Tree
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
    ("/srv/app/fake_llm.py", False,  # a rename on the host would go unseen by the container: never "restored"
     "spec.py: /srv/app/fake_llm.py is a file bind-mounted by itself into container sglang (from "
     "/srv/app/fake_llm.py): a restore replaces the host file, which the container would not see (it keeps the "
     "old file); restore it by hand and recreate the container, or mount its directory instead"),
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


def _probe(root: Path, call: Any, items: list[dict[str, str]]) -> tuple[int, list[dict[str, Any]]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = call(Tree("/", str(root)), items)
    return code or 0, [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def layer(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A stand-in container root with /opt/svc/spec.py (patched, uid 1000, mode 640), its backup copy on the
    host, and a host file a planted link names."""
    root, backup, host = tmp_path / "root", tmp_path / "backup", tmp_path / "host"
    (root / "opt/svc").mkdir(parents=True)
    backup.mkdir()
    host.mkdir()
    live = root / "opt/svc/spec.py"
    live.write_text("MODE = 'ddtree'\n")
    os.chown(live, 1000, 1000)
    live.chmod(0o640)
    (backup / "spec.py").write_text("MODE = 'nextn'\n")
    (host / "secret").write_text("host file\n")
    return root, backup, host


def test_write_replaces_the_file_inside_keeping_owner_and_mode(layer: tuple[Path, Path, Path]) -> None:
    root, backup, _ = layer
    before = (root / "opt/svc/spec.py").stat().st_ino
    code, said = _probe(root, write, [{"src": str(backup / "spec.py"), "live": "/opt/svc/spec.py"}])
    assert (code, said) == (0, [{"t": "written", "p": "/opt/svc/spec.py"}])
    after = (root / "opt/svc/spec.py").stat()
    assert (root / "opt/svc/spec.py").read_text() == "MODE = 'nextn'\n" and after.st_ino != before  # renamed over
    assert (after.st_uid, after.st_gid, after.st_mode & 0o777) == (1000, 1000, 0o640)
    assert sorted(os.listdir(root / "opt/svc")) == ["spec.py"]  # no temp file left


@pytest.mark.parametrize("planted", ["file", "dir"])
def test_write_never_follows_a_planted_link(layer: tuple[Path, Path, Path], planted: str) -> None:
    root, backup, host = layer
    if planted == "file":
        (root / "opt/svc/spec.py").unlink()
        (root / "opt/svc/spec.py").symlink_to(host / "secret")
    else:  # the dir on the way is a link to the host's dir
        shutil.rmtree(root / "opt/svc")
        (root / "opt/svc").symlink_to(host)
        (host / "spec.py").write_text("host file\n")
    code, said = _probe(root, write, [{"src": str(backup / "spec.py"), "live": "/opt/svc/spec.py"}])
    assert code == 1 and said[0]["t"] == "error", said
    assert said[0]["err"] == ("the live file is a symlink: not written" if planted == "file" else
                              f"/opt/svc inside the container is a symlink to {str(host)!r}: not followed")
    assert {p.name: p.read_text() for p in host.iterdir()} == {
        "secret": "host file\n", **({"spec.py": "host file\n"} if planted == "dir" else {})}


def test_describe_and_copy_out_for_the_plan_and_the_snapshot(layer: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, backup, _ = layer
    _, [record] = _probe(root, lambda tree, items: describe(tree, items) or 0,
                         [{"src": str(backup / "spec.py"), "live": "/opt/svc/spec.py"}])
    assert (record["st"], record["mode"], record["owner"]) == ("ok", "640", "1000:1000")
    assert "-MODE = 'ddtree'\n+MODE = 'nextn'\n" in record["diff"]
    snap = tmp_path / "snap"
    snap.mkdir(mode=0o700)
    code, said = _probe(root, copy_out, [{"live": "/opt/svc/spec.py", "dst": str(snap / "spec.py")}])
    assert code == 0 and (snap / "spec.py").read_text() == "MODE = 'ddtree'\n", said
