"""Files inside a container, the pure side: the probe's path resolution inside a root it must not leave (run
here on a directory standing in for the container's root), its whole pasted text run through the guard on
this machine, and the parser from probe output to a ``file:`` finding."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from commands.checks.check import Read
from commands.checks.container_files import (
    CONTAINER_FILES,
    PROBE_SOURCE,
    ContainerFileCheck,
)
from commands.checks.container_probe import hash_paths, list_paths, main
from commands.checks.file_times import parse_listing
from commands.checks.package_guard import SCRIPT_TEXT
from commands.checks.package_probe_fs import Tree
from commands.command_result import CommandResult

CLEAN = b"MODE = 'nextn'\n"
SHA = hashlib.sha256(CLEAN).hexdigest()


@pytest.fixture
def container(tmp_path: Path) -> tuple[Path, Path]:
    """A root with /srv/app/spec.py, links planted to a host file holding the same bytes, and that host file."""
    root, host = tmp_path / "root", tmp_path / "host"
    (root / "srv/app").mkdir(parents=True)
    host.mkdir()
    (root / "srv/app/spec.py").write_bytes(CLEAN)
    (host / "secret.py").write_bytes(CLEAN)  # what a followed link would read: the backup's own hash
    (root / "srv/app/abs.py").symlink_to(host / "secret.py")
    (root / "srv/app/rel.py").symlink_to("../../../host/secret.py")
    (root / "srv/current").symlink_to(host)
    return root, host


def probed(root: Path, request: dict[str, list[str]]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tree = Tree("/", str(root))
        if "hash" in request:
            hash_paths(tree, request["hash"])
        if "list" in request:
            list_paths(tree, request["list"])
    return out.getvalue()


def hashed(root: Path, path: str) -> dict[str, object]:
    [line] = probed(root, {"hash": [path]}).splitlines()
    record: dict[str, object] = json.loads(line)
    return record


def test_a_file_inside_the_root_is_hashed(container: tuple[Path, Path]) -> None:
    record = hashed(container[0], "/srv/app/spec.py")
    assert record["st"] == "ok" and record["size"] == len(CLEAN)


@pytest.mark.parametrize(("path", "target", "via"), [
    ("/srv/app/abs.py", "host/secret.py", None),  # absolute: on the host it would be the host's file
    ("/srv/app/rel.py", "../../../host/secret.py", None),  # relative, climbing out of the root
    ("/srv/current/secret.py", "host", "/srv/current"),  # a linked dir on the way
])
def test_a_symlink_is_reported_never_followed(container: tuple[Path, Path], path: str, target: str,
                                              via: str | None) -> None:
    record = hashed(container[0], path)
    assert record["st"] == "link" and str(record["target"]).endswith(target)
    assert record.get("via") == via and "d" not in record


@pytest.mark.parametrize("path", ["/../host/secret.py", "/srv/../../host/secret.py", "/srv/app/../../../../etc/passwd"])
def test_dot_dot_is_resolved_inside_the_root(container: tuple[Path, Path], path: str) -> None:
    """``..`` never climbs above the container's root: lexically, ``/..`` is ``/``."""
    assert hashed(container[0], path)["st"] == "missing"


def test_the_listing_is_finds_format_and_refuses_a_linked_dir(container: tuple[Path, Path]) -> None:
    root, _ = container
    os.utime(root / "srv/app/spec.py", (1700000000, 1700000000))
    listing = parse_listing(CommandResult("probe", 0, probed(root, {"list": [
        "/srv/app", "/srv/gone", "/srv/app/spec.py"]}).encode(), 0.1))
    assert listing.mtimes == {"/srv/app/spec.py": 1700000000.0}  # links are not files (as find -type f)
    assert listing.missing == ["/srv/gone"] and not listing.bad_records
    linked = parse_listing(CommandResult("probe", 0, probed(root, {"list": ["/srv/current"]}).encode(), 0.1))
    assert linked.bad_records == ["proofbot: /srv/current inside the container is a symlink to "
                                  f"{str(container[1])!r}: not followed"]


def test_a_root_that_is_not_a_containers_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main("/etc", json.dumps({"hash": ["/x"]})) == 2
    assert json.loads(capsys.readouterr().out)["reason"] == "bad-root"


def test_the_pasted_probe_runs_under_the_guard_and_refuses_the_hosts_own_root() -> None:
    """The text the host runs, through the root-owned interpreter the guard picks, given this process's PID: its
    root is the host's own (as a PID reused once the container is gone would be), so nothing is read."""
    run = subprocess.run(["sh", "-c", SCRIPT_TEXT, "proofbot-container", PROBE_SOURCE, f"/proc/{os.getpid()}/root",
                          json.dumps({"hash": [str(Path(__file__).resolve())]})],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 4, run.stdout + run.stderr
    assert json.loads(run.stdout) == {"t": "error", "reason": "host-root", "err": "the PID's root is the host's own "
                                      "root, not a container's (did the container stop?)"}


def _check() -> ContainerFileCheck:
    return ContainerFileCheck("spec.py", "pre", "/root/backup/spec.py", "/srv/app/spec.py", "sglang")


def _finding(probe_out: str, backup_sha: str = SHA, probe_status: int = 0) -> tuple[str, str]:
    own = CommandResult("sha256sum -- /root/backup/spec.py", 0, f"{backup_sha}  /root/backup/spec.py\n".encode(), 0.0)
    probe = CommandResult("probe", probe_status, probe_out.encode(), 0.0)
    finding = _check().parse(Read((own,), {CONTAINER_FILES: (probe,)}))
    return finding.status, finding.summary


def _line(**fields: object) -> str:
    return json.dumps({"t": "file", "p": "/srv/app/spec.py", **fields}) + "\n"


def _b64(digest: str) -> str:
    import base64
    return base64.urlsafe_b64encode(bytes.fromhex(digest)).decode().rstrip("=")


@pytest.mark.parametrize(("out", "status", "words"), [
    (_line(st="ok", size=15, a="sha256", d=_b64(SHA)), "pass", "identical to backup pre inside container sglang"),
    (_line(st="ok", size=15, a="sha256", d=_b64("ab" * 32)), "fail", "differs from backup pre inside container"),
    (_line(st="missing"), "fail", "live file /srv/app/spec.py is missing inside container sglang"),
    (_line(st="link", target="/etc/shadow"), "error", "is a symlink to '/etc/shadow': not followed"),
    (_line(st="link", target="/srv", via="/srv/current"), "error", "reached through the symlink /srv/current"),
    (_line(st="other"), "fail", "is not a regular file"),
    (json.dumps({"t": "error", "reason": "no-access", "err": "Permission denied"}) + "\n", "error",
     "could not check: no access to the container's root (Permission denied)"),
    ("no running main PID: no container root to read files from\n", "error", "no running main PID"),
    ("", "error", "the probe printed nothing"),
])
def test_the_finding_from_the_probes_output(out: str, status: str, words: str) -> None:
    got_status, summary = _finding(out)
    assert got_status == status and words in summary, summary


def test_an_unreadable_backup_copy_is_an_error_whatever_the_live_file() -> None:
    status, summary = _finding(_line(st="ok", size=15, a="sha256", d=_b64(SHA)), backup_sha="")
    assert status == "error" and "backup copy /root/backup/spec.py unreadable" in summary


def test_the_walk_never_takes_dot_dot(container: tuple[Path, Path]) -> None:
    """Below a container's root, ``..`` from its root dir would be the host's: the walk refuses it outright."""
    tree = Tree("/", str(container[0]))
    with pytest.raises(PermissionError):
        tree.open("../host/secret.py")


def test_package_inside_a_container_never_reads_the_hosts_own_root() -> None:
    """The package probe given a root (the guard's optional 4th argument) whose root is the host's: refused, an
    error that says so, never a verdict on the host's own environment at the same path."""
    from commands.checks.container_files import ContainerPackageCheck
    from commands.checks.package import PROBE_SOURCE as PACKAGE_PROBE

    run = subprocess.run(["sh", "-c", SCRIPT_TEXT, "proofbot-package", PACKAGE_PROBE, "/usr/bin/python3", "pip",
                          f"/proc/{os.getpid()}/root"], capture_output=True, timeout=60, check=False)
    check = ContainerPackageCheck("/usr/bin/python3", "pip", "sglang")
    finding = check.parse(Read((CommandResult("probe", run.returncode, run.stdout, 0.1),)))
    assert finding.status == "error", finding
    assert finding.summary == ("inside container sglang: could not check: no access to the container's root (the "
                               "PID's root is the host's own root, not a container's)")
    assert '"/proc/$pb_pid/root"' in check.steps()[0].text  # type: ignore[union-attr]
