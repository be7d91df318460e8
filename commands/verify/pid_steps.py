"""Verify's one round trip: the host-side script reads the main PID itself.

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

from commands.checks.cmdline import cmdline_argv
from commands.checks.service import service_state_argv
from commands.checks.stale import process_start_argvs
from commands.command_result import CommandResult
from commands.inventory import Service
from commands.ssh import BatchStep, ShellStep

# Shell variables of the batch's own shell; the prefix keeps them apart from the batch's `rc`.
_STATE, _STATUS, _PID = "pb_state", "pb_status", "pb_pid"
MAX_PID_DIGITS = 10

# systemd: the one `MainPID=` line; supervisor: the line whose program name (after any
# `group:`) is the unit and whose state is a word in capitals, its `pid N,` field.
_SYSTEMD_PID = "sed -n 's/^MainPID=\\([0-9]*\\)$/\\1/p' | head -n 1"
_SUPERVISOR_PID = ("awk '{ name = $1; sub(/.*:/, \"\", name) } name == ENVIRON[\"PB_UNIT\"] && $2 ~ /^[A-Z]+$/ "
                   "{ if ($3 == \"pid\") { pid = $4; sub(/,$/, \"\", pid); print pid }; exit }'")


def state_step(service: Service) -> ShellStep:
    """The manager's state, printed as it came, with the main PID kept in ``$pb_pid``."""
    argv = service_state_argv(service)
    extract = (_SYSTEMD_PID if service.manager == "systemd"
               else f"PB_UNIT={shlex.quote(service.unit)} {_SUPERVISOR_PID}")
    script = "\n".join([
        f"{_STATE}=$({shlex.join(argv)} </dev/null 2>&1); {_STATUS}=$?",
        f"printf '%s\\n' \"${_STATE}\"",
        f"{_PID}=$(printf '%s\\n' \"${_STATE}\" | {extract})",
        # Only a PID proper goes on: anything else the host printed leaves no PID at all.
        f"case ${_PID} in ''|0*|*[!0-9]*) {_PID}= ;; esac",
        f"[ ${{#{_PID}}} -le {MAX_PID_DIGITS} ] || {_PID}=",
        f"(exit ${_STATUS})",
    ])
    return ShellStep(script, shlex.join(argv))


def pid_step() -> ShellStep:
    """The PID the script will read from, for Python to hold against the parser's."""
    return ShellStep(f"printf '%s' \"${_PID}\"", "echo main PID")


def cmdline_step() -> ShellStep:
    return _with_pid("cat", "cmdline")


def process_start_steps() -> list[BatchStep]:
    """``/proc/PID/stat`` with ``/proc/uptime``, then the host clock and CLK_TCK (as ``process_start_argvs``)."""
    return [_with_pid("cat", "stat", "/proc/uptime"), *process_start_argvs(0)[1:]]


def _with_pid(command: str, proc_file: str, *more: str) -> ShellStep:
    rest = "".join(" " + shlex.quote(arg) for arg in more)
    script = (f"if [ -n \"${_PID}\" ]; then {command} \"/proc/${_PID}/{proc_file}\"{rest}; "
              f"else echo 'no main PID to read'; false; fi")
    return ShellStep(script, f"{command} /proc/$MAINPID/{proc_file}{rest}")


def shell_pid(result: CommandResult) -> int | None:
    text = result.text
    return int(text) if text.isdigit() and len(text) <= MAX_PID_DIGITS and not text.startswith("0") else None


def as_read(pid: int, results: list[CommandResult]) -> list[CommandResult]:
    """The PID-reading results named by the commands they ran for pid (their evidence)."""
    shown = [shlex.join(cmdline_argv(pid)), *(shlex.join(argv) for argv in process_start_argvs(pid))]
    return [replace(result, command=command) for result, command in zip(results, shown, strict=False)]
