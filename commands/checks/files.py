"""``file:<name>``: the live file is identical to its backup copy, by sha-256 read on the host."""

from __future__ import annotations

import re
from dataclasses import dataclass

from commands.checks.check import Check, Read, Step
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.frozen import Frozen
from commands.vocabulary import CheckStatus

_HASH_LINE = re.compile(r"^\\?([0-9a-f]{64})  (.+)$")


def file_hash_argv(backup_path: str, live_path: str) -> list[str]:
    return ["sha256sum", "--", backup_path, live_path]


def parse_file_hash(
    name: str, backup_name: str, backup_path: str, live_path: str, result: CommandResult
) -> Finding:
    check = f"file:{name}"
    evidence = Evidence.of(result.command, result.exit_status, result.text, result.duration_s)
    hashes = hashes_by_path(result.text)
    backup_hash, live_hash = hashes.get(backup_path), hashes.get(live_path)
    details = {"backup_sha256": backup_hash, "live_sha256": live_hash}
    if backup_hash is None:
        problem = _problem_for(backup_path, result.text) or "no hash printed"
        return Finding(check, CheckStatus.ERROR, f"backup copy {backup_path} unreadable: {problem}", evidence, details)
    if live_hash is None:
        live_problem = _problem_for(live_path, result.text)
        if live_problem and "No such file" in live_problem:
            return Finding(check, CheckStatus.FAIL, f"live file {live_path} is missing", evidence, details)
        reason = live_problem or "no hash printed"
        return Finding(check, CheckStatus.ERROR, f"live file unreadable: {reason}", evidence, details)
    if backup_hash == live_hash:
        return Finding(check, CheckStatus.PASS, f"identical to backup {backup_name} (sha256 {live_hash[:12]})",
                       evidence, details)
    return Finding(
        check, CheckStatus.FAIL,
        f"differs from backup {backup_name}: live {live_hash[:12]} ≠ backup {backup_hash[:12]}",
        evidence, details,
    )


def hashes_by_path(output: str) -> dict[str, str]:
    """Path → sha-256 from sha256sum output (GNU escapes names with backslashes or newlines)."""
    hashes: dict[str, str] = {}
    for line in output.splitlines():
        match = _HASH_LINE.match(line)
        if match:
            path = match.group(2)
            if line.startswith("\\"):
                path = path.replace("\\n", "\n").replace("\\\\", "\\")
            hashes[path] = match.group(1)
    return hashes


def _problem_for(path: str, output: str) -> str | None:
    for line in output.splitlines():
        if line.startswith("sha256sum:") and path in line:
            return line.split(path, 1)[1].lstrip(": ").strip() or line
    return None


@dataclass(frozen=True, eq=False, repr=False)
class FileCheck(Check, Frozen):
    """``file:<name>``: one backup file against its live path."""

    file: str
    backup_name: str
    backup_path: str
    live_path: str

    @property
    def name(self) -> str:
        return f"file:{self.file}"

    def steps(self) -> list[Step]:
        return [file_hash_argv(self.backup_path, self.live_path)]

    def parse(self, read: Read) -> Finding:
        return parse_file_hash(self.file, self.backup_name, self.backup_path, self.live_path, read.own[0])
