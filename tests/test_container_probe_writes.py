"""The container probe's restore side, run here on a directory standing in for a container's root: the plan's
description (state, mode, owner, diff), the snapshot copy out, and the atomic write in, each refusing a symlink
planted inside the root rather than following it onto the host; and ``main`` given a real ``/proc/PID/root``
(a chrooted child of this test)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from commands.checks.container_probe import copy_out, describe, main, write
from commands.checks.package_probe_fs import Tree

SPEC = "/srv/app/spec.py"
LIVE = b"MODE = 'nextn'\nTP = 2\n"
BACKUP = b"MODE = 'nextn'\nTP = 4\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with /srv/app/spec.py (mode 640), a host file outside it, links to that host file planted inside."""
    base = tmp_path / "root"
    (base / "srv/app").mkdir(parents=True)
    (base / "srv/app/spec.py").write_bytes(LIVE)
    (base / "srv/app/spec.py").chmod(0o640)
    (tmp_path / "host").mkdir()
    (tmp_path / "host/secret.py").write_bytes(b"host's own\n")
    (base / "srv/app/link.py").symlink_to(tmp_path / "host/secret.py")
    (base / "srv/linked").symlink_to(tmp_path / "host")
    (tmp_path / "backup.py").write_bytes(BACKUP)
    return base


def records(run: object, *args: object) -> tuple[object, list[dict[str, object]]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = run(*args)  # type: ignore[operator]
    return status, [json.loads(line) for line in out.getvalue().splitlines()]


def on(root: Path, run: object, items: list[dict[str, str]]) -> tuple[object, list[dict[str, object]]]:
    """What one of the probe's steps prints, run over ``root`` as the container's root."""
    return records(run, Tree("/", str(root)), items)


def test_the_plan_describes_the_live_file_and_its_diff_with_the_backup(root: Path, tmp_path: Path) -> None:
    _, [record] = on(root, describe, [{"live": SPEC, "src": str(tmp_path / "backup.py")}])
    assert record["st"] == "ok" and record["mode"] == "640" and record["owner"] == f"{os.getuid()}:{os.getgid()}"
    assert "-TP = 2\n+TP = 4\n" in str(record["diff"])


@pytest.mark.parametrize(("live", "state"), [("/srv/app/link.py", "link"), ("/srv/linked/secret.py", "link"),
                                             ("/srv/app/gone.py", "missing")])
def test_the_plan_never_reads_through_a_link(root: Path, tmp_path: Path, live: str, state: str) -> None:
    _, [record] = on(root, describe, [{"live": live, "src": str(tmp_path / "backup.py")}])
    assert record["st"] == state and "diff" not in record


def test_a_backup_copy_that_is_a_symlink_is_not_read_for_the_diff(root: Path, tmp_path: Path) -> None:
    (tmp_path / "planted.py").symlink_to(tmp_path / "host/secret.py")
    _, [record] = on(root, describe, [{"live": SPEC, "src": str(tmp_path / "planted.py")}])
    assert record["st"] == "unreadable" and "diff" not in record


def test_the_snapshot_copies_the_live_bytes_to_a_new_private_file(root: Path, tmp_path: Path) -> None:
    dst = tmp_path / "snap"
    status, [record] = on(root, copy_out, [{"live": SPEC, "dst": str(dst)}])
    assert status == 0 and record == {"t": "copied", "p": SPEC, "dst": str(dst)}
    assert dst.read_bytes() == LIVE and stat.S_IMODE(dst.stat().st_mode) == 0o600


def test_the_snapshot_refuses_a_link_and_an_existing_destination(root: Path, tmp_path: Path) -> None:
    status, [record] = on(root, copy_out, [{"live": "/srv/app/link.py", "dst": str(tmp_path / "a")}])
    assert status == 1 and "is a symlink to" in str(record["err"]) and not (tmp_path / "a").exists()
    (tmp_path / "taken").write_bytes(b"someone's\n")  # a name guessed in advance is never written through
    status, [record] = on(root, copy_out, [{"live": SPEC, "dst": str(tmp_path / "taken")}])
    assert status == 1 and record["t"] == "error" and (tmp_path / "taken").read_bytes() == b"someone's\n"


def test_the_write_replaces_atomically_keeping_owner_and_mode(root: Path, tmp_path: Path) -> None:
    before = (root / "srv/app/spec.py").stat()
    status, [record] = on(root, write, [{"live": SPEC, "src": str(tmp_path / "backup.py")}])
    after = (root / "srv/app/spec.py").stat()
    assert status == 0 and record == {"t": "written", "p": SPEC}
    assert (root / "srv/app/spec.py").read_bytes() == BACKUP and after.st_ino != before.st_ino  # renamed over
    assert stat.S_IMODE(after.st_mode) == 0o640 and (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert sorted(p.name for p in (root / "srv/app").iterdir()) == ["link.py", "spec.py"]  # no temp file left


def test_a_missing_live_file_is_created_world_readable(root: Path, tmp_path: Path) -> None:
    status, _ = on(root, write, [{"live": "/srv/app/new.py", "src": str(tmp_path / "backup.py")}])
    assert status == 0 and stat.S_IMODE((root / "srv/app/new.py").stat().st_mode) == 0o644


@pytest.mark.parametrize(("live", "words"), [
    ("/srv/app/link.py", "the live file is a symlink: not written"),
    ("/srv/linked/secret.py", "/srv/linked inside the container is a symlink to"),
])
def test_the_write_never_goes_through_a_link_onto_the_host(root: Path, tmp_path: Path, live: str, words: str) -> None:
    status, [record] = on(root, write, [{"live": live, "src": str(tmp_path / "backup.py")}])
    assert status == 1 and record["t"] == "error" and words in str(record["err"])
    assert (tmp_path / "host/secret.py").read_bytes() == b"host's own\n"
    assert not [p for p in (tmp_path / "host").iterdir() if p.name.startswith(".proofbot-")]


def test_a_backup_copy_that_is_a_symlink_is_never_written_in(root: Path, tmp_path: Path) -> None:
    (tmp_path / "planted.py").symlink_to(tmp_path / "host/secret.py")
    status, [record] = on(root, write, [{"live": SPEC, "src": str(tmp_path / "planted.py")}])
    assert status == 1 and record["t"] == "error" and (root / "srv/app/spec.py").read_bytes() == LIVE
    assert sorted(p.name for p in (root / "srv/app").iterdir()) == ["link.py", "spec.py"]  # the temp file removed


@pytest.fixture
def chrooted(root: Path) -> Iterator[int]:
    """A child process whose root is ``root``: its /proc/PID/root is what a container's main PID gives the probe."""
    if os.geteuid() != 0:
        pytest.skip("chroot needs root (CI runs as root)")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: chroot, say so, wait to be killed
        os.close(reader)
        os.chroot(str(root))
        os.write(writer, b"x")
        signal.pause()
        os._exit(0)
    os.close(writer)
    assert os.read(reader, 1) == b"x"
    os.close(reader)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_main_reads_and_writes_inside_a_real_proc_root(chrooted: int, root: Path, tmp_path: Path) -> None:
    proc_root, backup = f"/proc/{chrooted}/root", str(tmp_path / "backup.py")
    request = {"hash": [SPEC], "describe": [{"live": SPEC, "src": backup}]}
    status, [hashed, described] = records(main, proc_root, json.dumps(request))
    assert status == 0 and hashed["st"] == "ok" and "+TP = 4" in str(described["diff"])
    status, _ = records(main, proc_root, json.dumps({"copy_out": [{"live": SPEC, "dst": str(tmp_path / "s")}]}))
    assert status == 0 and (tmp_path / "s").read_bytes() == LIVE
    status, _ = records(main, proc_root, json.dumps({"write": [{"live": SPEC, "src": backup}]}))
    assert status == 0 and (root / "srv/app/spec.py").read_bytes() == BACKUP


def test_a_pid_whose_root_is_the_hosts_own_is_refused_for_a_listing_too(capsys: pytest.CaptureFixture[str]) -> None:
    """A PID reused by a host process once the container is gone: the listing says why in a record that does not
    parse (so no verdict rests on it), and nothing is read."""
    assert main(f"/proc/{os.getpid()}/root", json.dumps({"list": ["/etc"]})) == 4
    assert capsys.readouterr().out == ("proofbot: could not check: the PID's root is the host's own root, not a "
                                       "container's (did the container stop?)\0")


@pytest.mark.parametrize(("request_", "said"), [
    ({"hash": ["/etc/hostname"]}, '"reason": "no-access"'),
    ({"list": ["/etc"]}, "proofbot: could not check: no access to the container's root (Permission denied)\0"),
])
def test_a_root_the_probe_may_not_open_is_no_access(request_: dict[str, list[str]], said: str) -> None:
    """As a rootless engine's containers are to root without CAP_SYS_PTRACE over them: here, a child that has
    dropped to nobody asking for PID 1's root. Exit 4 and the words, never a verdict."""
    if os.geteuid() != 0:
        pytest.skip("dropping to nobody needs root (CI runs as root)")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: nobody, the probe's own main, its output down the pipe
        os.close(reader)
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main("/proc/1/root", json.dumps(request_))
        os.write(writer, out.getvalue().encode())
        os._exit(status)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        printed = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 4 and said in printed, printed


def test_the_listing_of_a_path_below_a_file_is_finds_no_such_file(root: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        from commands.checks.container_probe import list_paths
        list_paths(Tree("/", str(root)), ["/srv/app/spec.py/below"])
    assert out.getvalue() == "find: '/srv/app/spec.py/below': No such file or directory\n"
