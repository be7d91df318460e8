"""Files inside a container, read from the host: ``file:<name>`` and the file listing (for ``extra-files`` and
``stale-process``) of a container service, through ``/proc/<its main PID>/root`` by ``container_probe`` (no link
and no ``..`` followed, nothing run inside the container); the backup copies stay host paths, read as today.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import shlex
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from commands.checks.check import Fact, Read, Script, Step
from commands.checks.container_probe import CANNOT
from commands.checks.file_times import FILE_TIMES, listing_argv, listing_paths
from commands.checks.files import FileCheck, hashes_by_path
from commands.checks.package import PROBE_SOURCE as PACKAGE_PROBE
from commands.checks.package import PackageCheck, parse_package, pasted, probe_records, shown_command
from commands.checks.package_guard import GUARD_ID, SCRIPT_TEXT, refusals
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.inventory import Backup
from commands.inventory.containers import in_container as in_container  # where the restore plan asks it
from commands.vocabulary import CheckStatus

PROBE_SOURCE = pasted("container_probe.py")
PROBE_ID = hashlib.sha256(PROBE_SOURCE.encode()).hexdigest()[:12]
CONTAINER_FILES = "container-files"  # the fact's name: every live file's hash, read once for the file checks
NO_ACCESS = "could not check: no access to the container's root"
_NO_PID = "no running main PID: no container root to read files from"


def probe_script(request: dict[str, Any], *, listing: bool) -> Script:
    """The probe on ``/proc/$pb_pid/root`` (the PID main-pid's step kept in the batch's shell), under the guard."""
    data = json.dumps(request, sort_keys=True)
    run = shlex.join(["sh", "-c", SCRIPT_TEXT, "proofbot-container", PROBE_SOURCE])
    none = f"printf '%s\\0' {shlex.quote('proofbot: ' + _NO_PID)}" if listing else f"echo {shlex.quote(_NO_PID)}"
    text = (f'if [ -n "$pb_pid" ]; then {run} "/proc/$pb_pid/root" {shlex.quote(data)}; '
            f"else {none}; false; fi")
    shown = shlex.join(["sh", "-c", f"<proofbot package guard sha256:{GUARD_ID}>", "proofbot-container",
                        f"<proofbot container probe sha256:{PROBE_ID}>", "/proc/$MAINPID/root", data])
    return Script(text, shown + "  # runs: <root-owned python3> -I -S -c <probe>, reading the container's files "
                  "from the host, no link followed")


@dataclass(frozen=True)
class ContainerFiles(Fact):
    """Every live file of the backup, hashed inside the container in one probe run."""

    paths: tuple[str, ...]
    needs: ClassVar[tuple[str, ...]] = ("main-pid",)  # whose step keeps $pb_pid

    @property
    def name(self) -> str:
        return CONTAINER_FILES

    def steps(self) -> list[Step]:
        return [probe_script({"hash": list(self.paths)}, listing=False)]


@dataclass(frozen=True)
class ContainerFileTimes(Fact):
    """The ``file-times`` listing of a container service: the backup dir on the host (``find``), the watch dirs
    and live files inside the container (the probe, in find's record format), in one step."""

    host_paths: tuple[str, ...]  # the backup dir (a restore: the files it wrote on the host)
    paths: tuple[str, ...]
    needs: ClassVar[tuple[str, ...]] = ("main-pid",)

    @property
    def name(self) -> str:
        return FILE_TIMES

    def steps(self) -> list[Step]:
        find = f"{shlex.join(listing_argv(list(self.host_paths)))}; " if self.host_paths else ""
        probe = probe_script({"list": list(self.paths)}, listing=True)
        return [Script(f"{find}{probe.text}", f"{find}{probe.shown}")]

    @classmethod
    def of_backup(cls, backup: Backup) -> ContainerFileTimes:
        return cls((backup.dir,), tuple(path for path in listing_paths(backup) if path != backup.dir))


def live_record(live_path: str, result: CommandResult) -> tuple[dict[str, Any] | None, str]:
    """What the probe said of one live path; None and why when it said nothing of it."""
    records, other = probe_records(result.output)
    error = next((r for r in records if r.get("t") == CANNOT), None)
    if error is not None:
        if error.get("reason") == "no-access":
            return None, f"{NO_ACCESS} ({error.get('err')}): the engine or this SSH user may not enter it"
        return None, f"the probe refused: {error.get('err') or error.get('reason')}"
    found = next((r for r in records if r.get("t") == "file" and r.get("p") == live_path), None)
    if found is not None:
        return found, ""
    refused = refusals(other)
    if refused:
        return None, "no root-owned interpreter outside the container to read it with: " + "; ".join(refused[:2])
    return None, (other[-1] if other else f"the probe printed nothing (exit {result.exit_status})")


def hex_digest(record: dict[str, Any]) -> str | None:
    encoded = str(record.get("d", ""))
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex() or None
    except (binascii.Error, ValueError):
        return None


@dataclass(frozen=True)
class ContainerFileCheck(FileCheck):
    """``file:<name>`` of a container service: the backup copy on the host, the live file inside the container."""

    container: str = ""
    needs: ClassVar[tuple[str, ...]] = (CONTAINER_FILES,)

    def steps(self) -> list[Step]:
        return [["sha256sum", "--", self.backup_path]]

    def parse(self, read: Read) -> Finding:
        own, probe = read.own[0], read.of(CONTAINER_FILES)[0]
        record, why = live_record(self.live_path, probe)
        shown = [line for line in probe.text.splitlines() if f'"p": {json.dumps(self.live_path)}' in line
                 or not line.startswith("{")]
        evidence = Evidence.of(f"{own.command}\n{probe.command}", probe.exit_status if own.exit_status == 0
                               else own.exit_status, "\n".join([own.text.rstrip(), *shown]),
                               own.duration_s + probe.duration_s)
        return container_file_finding(self, hashes_by_path(own.text).get(self.backup_path), record, why, evidence)


def container_file_finding(check: ContainerFileCheck, backup_hash: str | None, record: dict[str, Any] | None,
                           why: str, evidence: Evidence) -> Finding:
    name, where = check.name, f"inside container {check.container}"
    live_hash = hex_digest(record) if record and record.get("st") == "ok" else None
    details = {"backup_sha256": backup_hash, "live_sha256": live_hash, "container": check.container}
    if backup_hash is None:
        return Finding(name, CheckStatus.ERROR, f"backup copy {check.backup_path} unreadable", evidence, details)
    if record is None:
        return Finding(name, CheckStatus.ERROR, f"{check.live_path} {where} not read: {why}", evidence, details)
    state = record.get("st")
    if state == "missing":
        return Finding(name, CheckStatus.FAIL, f"live file {check.live_path} is missing {where}", evidence, details)
    if state == "link":
        via = record.get("via")
        link = f"is reached through the symlink {via}" if via else "is a symlink"
        return Finding(name, CheckStatus.ERROR, f"{check.live_path} {where} {link} to {record.get('target')!r}: not "
                       "followed (a link is resolved against the host's root, not the container's): nothing read",
                       evidence, details)
    if state != "ok" or live_hash is None:
        what = {"other": "is not a regular file", "hardlink": "is a hard link others cannot read: not read"}.get(
            str(state), f"is unreadable: {record.get('err')}")
        status = CheckStatus.FAIL if state == "other" else CheckStatus.ERROR
        return Finding(name, status, f"{check.live_path} {where} {what}", evidence, details)
    if live_hash == backup_hash:
        return Finding(name, CheckStatus.PASS, f"identical to backup {check.backup_name} {where} "
                       f"(sha256 {live_hash[:12]})", evidence, details)
    return Finding(name, CheckStatus.FAIL, f"differs from backup {check.backup_name} {where}: live "
                   f"{live_hash[:12]} ≠ backup {backup_hash[:12]}", evidence, details)


@dataclass(frozen=True)
class ContainerPackageCheck(PackageCheck):
    """``package:<dist>`` of an environment inside the container: the same probe, given the container's root."""

    container: str = ""
    needs: ClassVar[tuple[str, ...]] = ("main-pid",)

    def steps(self) -> list[Step]:
        run = shlex.join(["sh", "-c", SCRIPT_TEXT, "proofbot-package", PACKAGE_PROBE, self.python, self.dist])
        text = f'if [ -n "$pb_pid" ]; then {run} "/proc/$pb_pid/root"; else echo {shlex.quote(_NO_PID)}; false; fi'
        return [Script(text, f"{shown_command(self.python, self.dist)}, inside the container from /proc/$MAINPID/root")]

    def parse(self, read: Read) -> Finding:
        finding = parse_package(self.python, self.dist, read.own[0])
        return replace(finding, summary=f"inside container {self.container}: {finding.summary}")
