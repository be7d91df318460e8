"""Tier 2, real Docker: files inside containers, read from the host through /proc/<pid>/root over real OpenSSH.
One private dockerd in one namespace host for the module, one container per case (the lab's bookworm rootfs as
the image, `--network host --init`); the backup copies sit on the host, the live files in each container's own
layer. A second sshd on the same host, started without CAP_SYS_PTRACE, is "a root that cannot enter"."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, write_inventory
from tests.lab import net, skip_or_fail
from tests.lab.common import FAKE_LLM, LabHost, Scenario
from tests.lab.docker import DOCKER, Engine, require_docker, start_engine, stop_engine
from tests.lab.fixtures import running_lab
from tests.lab.image import ensure_image
from tests.lab.netns import NetnsHost, NetnsLab
from tests.lab.waits import until

pytestmark = [pytest.mark.docker, pytest.mark.tier2, pytest.mark.timeout(600)]

IMAGE = "proofbot-lab:bookworm"
SCRIPT = "/srv/app/fake_llm.py"
LIVE = "/opt/svc/spec.py"  # in each container's own layer
WATCH = "/opt/svc"
BACKUP = "/root/ct-backup"  # on the host
CLEAN = "MODE = 'nextn'\n"
PATCHED = "MODE = 'ddtree'  # patched inside the container\n"
PORTS = {"clean": 30101, "patched": 30102, "planted": 30103, "sealed": 30104, "layer": 30105, "bound": 30106,
         "inside": 30107}
CONF = "/opt/conf/conf.py"  # in "bound", a bind mount of the host dir FilesLab.conf_dir
CONF_BACKUP = "/root/ct-conf-backup"
SITE = "/usr/local/lib/python3.11/dist-packages"  # the image's python3 (bookworm's 3.11) reads it
MODULE = f"{SITE}/ctdemo/__init__.py"


def _record_row(path: str, text: str) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode().rstrip("=")
    return f"{path},sha256={digest},{len(text.encode())}\n"


# A dist installed in the image as pip would leave it: its module, METADATA, INSTALLER and a RECORD of both.
_DIST_FILES = {"ctdemo/__init__.py": "VERSION = 1\n", "ctdemo-1.0.dist-info/METADATA":
               "Metadata-Version: 2.1\nName: ctdemo\nVersion: 1.0\n", "ctdemo-1.0.dist-info/INSTALLER": "pip\n"}
DIST = {f"{SITE}/{path}": text for path, text in _DIST_FILES.items()} | {
    f"{SITE}/ctdemo-1.0.dist-info/RECORD": "".join(_record_row(path, text) for path, text in _DIST_FILES.items())
    + "ctdemo-1.0.dist-info/RECORD,,\n"}
NO_PTRACE_PORT = 2222
NO_PTRACE_SSHD = f"""[program:sshd-no-ptrace]
command=setpriv --bounding-set=-sys_ptrace --inh-caps=-sys_ptrace -- /usr/sbin/sshd -D -e -p {NO_PTRACE_PORT} \
-f /etc/ssh/sshd_config
autorestart=true
startsecs=0
redirect_stderr=true
stdout_logfile=/var/log/supervisor/sshd-no-ptrace.log
"""


@dataclass
class FilesLab:
    lab: NetnsLab
    host: LabHost
    engine: Engine
    planted_secret: str
    conf_dir: Path

    def document(self, name: str, *, port: int | None = None) -> dict[str, Any]:
        document = self.lab.inventory()
        document["hosts"] = {name: {
            "address": self.host.address, "port": port or self.host.port,
            "service": {"manager": "docker", "container": name, "engine": {"cli": DOCKER, "host": self.engine.socket},
                        "health_url": f"http://127.0.0.1:{PORTS[name]}/health", "min_uptime_s": 0},
            "packages": {"python": "/usr/bin/python3", "dists": ["ctdemo"]},
            "backups": {"pre": {"dir": BACKUP, "files": {"spec.py": LIVE}, "watch": [WATCH]},
                        "conf": {"dir": CONF_BACKUP, "files": {"conf.py": CONF}},
                        "into": {"dir": BACKUP, "files": {"spec.py": LIVE}, "into_container": True}}}}
        return document

    def inside(self, name: str, path: str) -> str:
        return self.engine.docker("exec", name, "cat", path).stdout

    def exec(self, name: str, script: str, *args: str) -> None:
        """A test's own change inside the container (proofbot never runs anything in there)."""
        self.engine.docker("exec", name, "sh", "-c", script, *args)


def _run(engine: Engine, name: str, *extra: str) -> None:
    """Created, given its clean file in its own layer (before it starts: the file is older than the process),
    then started."""
    engine.docker("create", "--name", name, "--init", "--network", "host", *extra,
                  "-v", f"{FAKE_LLM}:{SCRIPT}:ro", IMAGE, "python3", SCRIPT, "--host", "127.0.0.1",
                  "--port", str(PORTS[name]))
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for path, text in {LIVE: CLEAN, **DIST}.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mtime = len(text.encode()), int(time.time()) - 60
            tar.addfile(info, io.BytesIO(text.encode()))
    engine.docker("cp", "-", f"{name}:/", stdin=archive.getvalue())
    engine.docker("start", name)


def _no_ptrace_sshd(lab: NetnsLab, host: NetnsHost) -> None:
    """A second sshd of the same host whose sessions lack CAP_SYS_PTRACE (its bounding set dropped): as root,
    it cannot open /proc/PID/root of a process holding that capability (`--cap-add SYS_PTRACE`)."""
    host.local_path("/etc/supervisor/conf.d/sshd-no-ptrace.conf").write_text(NO_PTRACE_SSHD)
    host.run(["supervisorctl", "-c", "/etc/supervisor/supervisord.conf", "update"])
    with lab.known_hosts.open("a") as known:
        known.write(f"[{host.address}]:{NO_PTRACE_PORT} {host.host_key_pub}\n")


# What the containers here never use (docs, locales, apt and dpkg state, systemd, perl): left out of the image, so
# its import and its removal at teardown take less of CI's time.
LEAN_EXCLUDES = ("./usr/share", "./var/cache", "./var/lib/apt", "./var/lib/dpkg", "./usr/lib/systemd",
                 "./usr/lib/x86_64-linux-gnu/systemd", "./usr/lib/x86_64-linux-gnu/gconv",
                 "./usr/lib/x86_64-linux-gnu/perl-base", "./usr/bin/perl", "./usr/bin/perl5.36.0")


def _import_lean(engine: Engine, rootfs: Path) -> None:
    excludes = [f"--exclude={path}" for path in LEAN_EXCLUDES]
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", *excludes, "-c", "."],
                           stdout=subprocess.PIPE)
    try:
        subprocess.run([DOCKER, "import", "-", IMAGE], env=engine.env, stdin=tar.stdout, capture_output=True,
                       timeout=300, check=True)
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait(timeout=60)


@pytest.fixture(scope="module")
def files_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FilesLab]:
    reason = require_docker("container files lab")
    if reason:
        skip_or_fail(reason)
    rootfs, _ = ensure_image()
    with running_lab(NetnsLab, {"ct140": Scenario()}) as lab:
        host = lab.hosts["ct140"]
        assert isinstance(host, NetnsHost)
        for backup_dir, file in ((BACKUP, "spec.py"), (CONF_BACKUP, "conf.py")):
            host.local_path(backup_dir).mkdir(mode=0o700)
            (host.local_path(backup_dir) / file).write_text(CLEAN)
        conf_dir = lab.workdir / "conf"  # /var/tmp: the same path inside the lab host
        conf_dir.mkdir()
        (conf_dir / "conf.py").write_text(CLEAN)
        # A host file with the backup's own bytes, outside every container: a followed link would "prove" it.
        secret = lab.workdir / "host-side" / "spec.py"  # /var/tmp: the same path inside the lab host
        secret.parent.mkdir()
        secret.write_text(CLEAN)
        engine = start_engine(netns=host.netns)
        try:
            _import_lean(engine, rootfs)
            for name in ("clean", "patched", "planted", "layer", "inside"):
                _run(engine, name)
            _run(engine, "bound", "-v", f"{conf_dir}:{os.path.dirname(CONF)}")
            _run(engine, "sealed", "--cap-add", "SYS_PTRACE")
            _no_ptrace_sshd(lab, host)
            yield FilesLab(lab, host, engine, str(secret), conf_dir)
        finally:
            engine.docker("rm", "-f", *PORTS, check=False)  # killed at once: dockerd's stop would wait for each
            stop_engine(engine)


async def verify(files_lab: FilesLab, name: str, tmp_path: Path, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    inventory = write_inventory(tmp_path / f"{name}.yml", files_lab.document(name, **kwargs))
    run = await run_cli("verify", name, "--backup", "pre", "--json", "--inventory", str(inventory),
                        "--db", str(tmp_path / "a.db"))
    assert run.stdout.strip(), run.stderr
    return run.code, {check["name"]: check for check in json.loads(run.stdout)["checks"]}


async def test_a_clean_container_passes_with_its_files_read_inside_it(files_lab: FilesLab, tmp_path: Path) -> None:
    code, checks = await verify(files_lab, "clean", tmp_path)
    assert {name: check["status"] for name, check in checks.items()} == {
        "file:spec.py": "pass", "extra-files": "pass", "package:ctdemo": "pass", "main-pid": "pass", "health": "pass",
        "cmdline": "pass", "stale-process": "pass"}, checks
    assert code == 0
    file_check = checks["file:spec.py"]
    assert file_check["summary"] == f"identical to backup pre inside container clean (sha256 " \
        f"{hashlib.sha256(CLEAN.encode()).hexdigest()[:12]})"
    assert "/proc/$MAINPID/root" in file_check["evidence"]["command"]
    assert "1 file(s) in 1 watch dir(s)" in checks["extra-files"]["summary"]
    assert checks["package:ctdemo"]["summary"].startswith("inside container clean: ctdemo 1.0 (installer pip): 3 "
                                                          "file(s) proven identical to RECORD")


async def test_a_file_patched_inside_the_container_fails_and_so_does_an_unlisted_module(
        files_lab: FilesLab, tmp_path: Path) -> None:
    files_lab.exec("patched", f"printf %s \"$0\" > {LIVE} && echo 'x = 1' > {WATCH}/ddtree.py && "
                   f"echo 'VERSION = 2' > {MODULE} && echo 'x = 1' > {SITE}/ctdemo/ddtree.py", PATCHED)
    code, checks = await verify(files_lab, "patched", tmp_path)
    assert code == 1
    assert checks["file:spec.py"]["status"] == "fail"
    assert checks["file:spec.py"]["summary"].startswith("differs from backup pre inside container patched: live "
                                                        f"{hashlib.sha256(PATCHED.encode()).hexdigest()[:12]}")
    extra = checks["extra-files"]
    assert extra["status"] == "fail" and f"{WATCH}/ddtree.py" in extra["details"]["extra_files"], extra
    package = checks["package:ctdemo"]
    assert package["status"] == "fail", package
    assert "ctdemo/__init__.py differs from RECORD" in package["summary"]
    assert "ctdemo/ddtree.py is not listed in RECORD" in package["summary"]


async def test_a_symlink_out_of_the_containers_root_is_not_followed(files_lab: FilesLab, tmp_path: Path) -> None:
    """The planted link names a host file holding the backup's own bytes: a plain sha256sum through
    /proc/PID/root on the host follows it and "proves" the file; proofbot must not."""
    files_lab.exec("planted", f"ln -sfn {files_lab.planted_secret} {LIVE}")
    pid = files_lab.engine.docker("inspect", "--format", "{{.State.Pid}}", "planted").stdout.strip()
    naive = files_lab.host.run(["sha256sum", f"/proc/{pid}/root{LIVE}"]).stdout
    assert naive.startswith(hashlib.sha256(CLEAN.encode()).hexdigest())  # the trap is real
    code, checks = await verify(files_lab, "planted", tmp_path)
    finding = checks["file:spec.py"]
    assert finding["status"] == "error" and code == 3, finding
    assert f"{LIVE} inside container planted is a symlink to {files_lab.planted_secret!r}: not followed" in \
        finding["summary"]
    assert finding["details"]["live_sha256"] is None


async def test_a_root_that_cannot_enter_the_container_is_an_error_never_a_pass(files_lab: FilesLab,
                                                                              tmp_path: Path) -> None:
    host = files_lab.host
    await until("the sshd without CAP_SYS_PTRACE", lambda: net.ssh_banner(host.address, NO_PTRACE_PORT)
                .startswith(b"SSH-"), timeout_s=30, interval_s=0.2)
    _, checks = await verify(files_lab, "sealed", tmp_path, port=NO_PTRACE_PORT)
    assert checks["main-pid"]["status"] == "pass", checks["main-pid"]  # the engine answers: only the root is shut
    finding = checks["file:spec.py"]
    assert finding["status"] == "error", finding
    assert "could not check: no access to the container's root (" in finding["summary"]
    assert checks["extra-files"]["status"] == "error"
    assert checks["package:ctdemo"]["status"] == "error"
    assert "could not check: no access to the container's root (" in checks["package:ctdemo"]["summary"]
    assert "no access to the container's root" in checks["extra-files"]["summary"]
    # the same container, read by a root that may enter: it passes (the refusal above was the access, not the file)
    assert (await verify(files_lab, "sealed", tmp_path))[1]["file:spec.py"]["status"] == "pass"


async def restore(files_lab: FilesLab, name: str, backup: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    inventory = write_inventory(tmp_path / f"{name}.yml", files_lab.document(name))
    run = await run_cli("restore", name, backup, "--yes", "--json", "--inventory", str(inventory),
                        "--db", str(tmp_path / "a.db"))
    assert run.stdout.strip(), run.stderr
    return run.code, json.loads(run.stdout)


async def test_a_file_in_the_containers_own_layer_is_refused_with_nothing_changed(files_lab: FilesLab,
                                                                                  tmp_path: Path) -> None:
    files_lab.exec("layer", f"printf %s \"$0\" > {LIVE}", PATCHED)
    code, result = await restore(files_lab, "layer", "pre", tmp_path)
    assert code == 4, result
    message = result["error"]["message"]
    assert f"spec.py: {LIVE} is in container layer's own layer: a restore there is lost at the next recreate; " \
        "rebuild or re-pull the image (or set into_container: true on backup pre" in message, message
    assert files_lab.inside("layer", LIVE) == PATCHED
    assert not files_lab.host.local_path(BACKUP + ".proofbot-snapshots").exists()  # not even a snapshot dir


async def test_a_bind_mounted_file_restores_on_the_host(files_lab: FilesLab, tmp_path: Path) -> None:
    (files_lab.conf_dir / "conf.py").write_text(PATCHED)
    assert files_lab.inside("bound", CONF) == PATCHED
    code, result = await restore(files_lab, "bound", "conf", tmp_path)
    assert code == 0, result
    steps = {finding["name"]: finding for finding in result["checks"]}
    assert steps["file:conf.py"]["status"] == "pass", steps
    assert (files_lab.conf_dir / "conf.py").read_text() == CLEAN  # the host's file, the mount's source
    assert files_lab.inside("bound", CONF) == CLEAN  # and what the container sees
    snapshots = list(files_lab.host.local_path(CONF_BACKUP + ".proofbot-snapshots").glob("*/conf.py"))
    assert [snapshot.read_text() for snapshot in snapshots] == [PATCHED]


async def test_into_container_restores_inside_and_rereads(files_lab: FilesLab, tmp_path: Path) -> None:
    files_lab.exec("inside", f"printf %s \"$0\" > {LIVE} && chown 1000:1000 {LIVE} && chmod 640 {LIVE}", PATCHED)
    code, result = await restore(files_lab, "inside", "into", tmp_path)
    assert code == 0, result
    steps = {finding["name"]: finding for finding in result["checks"]}
    proof = ("recheck", "snapshot", "replace", "file:spec.py")
    assert {name: steps[name]["status"] for name in proof} == dict.fromkeys(proof, "pass"), steps
    assert "inside container inside" in steps["file:spec.py"]["summary"]  # the re-read went through its root
    assert files_lab.inside("inside", LIVE) == CLEAN
    assert files_lab.engine.docker("exec", "inside", "stat", "-c", "%u:%g %a", LIVE).stdout.split() == [
        "1000:1000", "640"]  # the replaced file's owner and mode
    [snapshot] = files_lab.host.local_path(BACKUP + ".proofbot-snapshots").glob("*/spec.py")
    assert snapshot.read_text() == PATCHED


async def test_into_container_never_writes_through_a_planted_link(files_lab: FilesLab, tmp_path: Path) -> None:
    """The file is a link to a host path: the plan refuses it, and the host file is the same file, untouched."""
    files_lab.exec("planted", f"ln -sfn {files_lab.planted_secret} {LIVE}")
    before = os.stat(files_lab.planted_secret)
    code, result = await restore(files_lab, "planted", "into", tmp_path)
    assert code == 4, result
    assert f"{LIVE} inside container planted is a symlink to {files_lab.planted_secret!r}: not followed" in \
        result["error"]["message"]
    after = os.stat(files_lab.planted_secret)
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
