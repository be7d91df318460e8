"""The main PID read in the batch's own shell, so the reads that need it ride the same round trip.

The service manager's answer is captured ONCE in a shell variable, printed as the main-pid
command's own framed result, and the PID taken from that same text: digits only, no leading
zero, at most 10 of them, else none. The cmdline and ``/proc/PID/stat`` reads that follow in
the same batch use that variable, always quoted, so no string the host printed reaches a
command. The shell's PID is printed as a framed result of its own, and Python checks it
against the PID the pure parser (``commands.checks.service``) reads from the printed text:
the PID every finding names is the PID that was read, or the reads are not judged.

Between the manager's answer and the reads there is no network round trip any more, so the
window for the PID to be reused is smaller than with two round trips; the process start time
from ``/proc/PID/stat`` stays the guard the stale-process check compares.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import ClassVar

from commands.checks.check import Fact, Script, Step
from commands.command_result import CommandResult

# Shell variables of the batch's own shell; the prefix keeps them apart from the batch's `rc`.
_STATE, _STATUS, _PID = "pb_state", "pb_status", "pb_pid"
MAX_PID_DIGITS = 10

MAIN_PID_READ = "main-pid-read"  # the fact's name: the PID the script kept, for Python to check


def state_script(argv: list[str], pid_filter: str, command: str | None = None) -> Script:
    """The manager's state (``argv``), printed as it came, with the main PID (``pid_filter`` reads it from
    that text on its stdin) kept in ``$pb_pid``. ``command``: the shell text that runs instead of
    ``shlex.join(argv)`` (proofbot's own, naming a shell variable an earlier line set); argv is what it shows."""
    script = "\n".join([
        f"{_STATE}=$({command or shlex.join(argv)} </dev/null 2>&1); {_STATUS}=$?",
        f"printf '%s\\n' \"${_STATE}\"",
        f"{_PID}=$(printf '%s\\n' \"${_STATE}\" | {pid_filter})",
        # Only a PID proper goes on: anything else the host printed leaves no PID at all.
        f"case ${_PID} in ''|0*|*[!0-9]*) {_PID}= ;; esac",
        f"[ ${{#{_PID}}} -le {MAX_PID_DIGITS} ] || {_PID}=",
        f"(exit ${_STATUS})",
    ])
    return Script(script, shlex.join(argv))


def pid_step() -> Script:
    """The PID the script will read from, for Python to hold against the parser's."""
    return Script(f"printf '%s' \"${_PID}\"", "echo main PID")


def cmdline_step() -> Script:
    return _with_pid("cat", "cmdline")


def process_start_steps() -> list[Step]:
    """``/proc/PID/stat`` with ``/proc/uptime``, then the host clock and CLK_TCK (as ``process_start_argvs``)."""
    return [_with_pid("cat", "stat", "/proc/uptime"), ["date", "+%s.%N"], ["getconf", "CLK_TCK"]]


def _with_pid(command: str, proc_file: str, *more: str) -> Script:
    rest = "".join(" " + shlex.quote(arg) for arg in more)
    script = (f"if [ -n \"${_PID}\" ]; then {command} \"/proc/${_PID}/{proc_file}\"{rest}; "
              f"else echo 'no main PID to read'; false; fi")
    return Script(script, f"{command} /proc/$MAINPID/{proc_file}{rest}")


def shell_pid(result: CommandResult) -> int | None:
    text = result.text
    return int(text) if text.isdigit() and len(text) <= MAX_PID_DIGITS and not text.startswith("0") else None


def as_read(results: list[CommandResult], argvs: list[list[str]]) -> list[CommandResult]:
    """The PID-reading results named by the commands they ran for the PID (``argvs``: their evidence)."""
    return [replace(result, command=shlex.join(argv)) for result, argv in zip(results, argvs, strict=False)]


class MainPidRead(Fact):
    """The PID the host-side script kept (``$pb_pid``), printed for Python to hold against the parser's."""

    needs: ClassVar[tuple[str, ...]] = ("main-pid",)  # whose script keeps it

    @property
    def name(self) -> str:
        return MAIN_PID_READ

    def steps(self) -> list[Step]:
        return [pid_step()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MainPidRead)

    def __hash__(self) -> int:
        return hash(MAIN_PID_READ)
