"""``cmdline``: the running main process holds every expected flag and no forbidden one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from commands.checks.check import Check, Read, Step
from commands.checks.pid_read import MAIN_PID_READ, as_read, cmdline_step
from commands.checks.service import agreed_pid
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding, could_not_check
from commands.frozen import Frozen
from commands.inventory import Service
from commands.redact import redact
from commands.vocabulary import CheckStatus


def cmdline_argv(pid: int) -> list[str]:
    return ["cat", f"/proc/{pid}/cmdline"]


def parse_cmdline(result: CommandResult) -> list[str]:
    """The arguments of ``/proc/PID/cmdline``: NUL-separated, empty ones dropped."""
    return [arg for arg in result.output.decode("utf-8", "replace").split("\x00") if arg]


def flag_problems(service: Service, args: list[str]) -> tuple[list[str], list[str]]:
    """The expected flags missing from args, and the forbidden flags present in them."""
    missing = [flag for flag in service.expect_flags if not has_flag(args, flag)]
    forbidden = [flag for flag in service.forbid_flags if has_flag(args, flag)]
    return missing, forbidden


def has_flag(args: list[str], flag: str) -> bool:
    """True when flag's tokens appear in order in args ("--a b" also matches "--a=b")."""
    tokens = flag.split()
    if not tokens:
        return False
    joined = [tokens[0] + "=" + " ".join(tokens[1:])] if len(tokens) > 1 else []
    for start in range(len(args)):
        if args[start : start + len(tokens)] == tokens:
            return True
        if joined and args[start] == joined[0]:
            return True
        if len(tokens) == 1 and args[start].startswith(tokens[0] + "="):
            return True
    return False


def cmdline_finding(service: Service, pid: int, result: CommandResult) -> Finding:
    args = parse_cmdline(result)
    shown = redact(" ".join(args))
    evidence = Evidence.of(result.command, result.exit_status, shown, result.duration_s)
    if result.exit_status != 0 or not args:
        return Finding("cmdline", CheckStatus.ERROR, f"could not read the command line of PID {pid}", evidence)
    missing, forbidden = flag_problems(service, args)
    details = {"missing": missing, "forbidden": forbidden}
    if missing or forbidden:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"forbidden {', '.join(forbidden)} present"] if forbidden else []
        )
        return Finding("cmdline", CheckStatus.FAIL, f"PID {pid}: " + "; ".join(parts), evidence, details)
    wanted = len(service.expect_flags) + len(service.forbid_flags)
    return Finding("cmdline", CheckStatus.PASS,
                   f"PID {pid}: {len(service.expect_flags)} expected flag(s) present, "
                   f"{len(service.forbid_flags)} forbidden absent" if wanted else
                   f"PID {pid}: no flags to check", evidence, details)


@dataclass(frozen=True, eq=False, repr=False)
class CmdlineCheck(Check, Frozen):
    """``cmdline`` of the main PID the same batch read (``main-pid`` and the script's own read of it)."""

    service: Service
    needs: ClassVar[tuple[str, ...]] = ("main-pid", MAIN_PID_READ)

    @property
    def name(self) -> str:
        return "cmdline"

    def steps(self) -> list[Step]:
        return [cmdline_step()]

    def parse(self, read: Read) -> Finding:
        pid, why = agreed_pid(self.service, read)
        if pid is None:
            return could_not_check("cmdline", why or "no running main PID to read a command line from")
        return cmdline_finding(self.service, pid, as_read(list(read.own), [cmdline_argv(pid)])[0])
