"""Batch framing: several commands in one exec round trip, each result cut back out by markers that carry a
per-call nonce (nothing a command prints can forge another's result or exit status)."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from commands.command_result import CommandResult
from commands.errors import MissingOutput
from commands.frozen import Frozen

EXIT_STATUS = re.compile(rb"[0-9]{1,3}")  # what sh's $? prints: 0..255


@dataclass(frozen=True, eq=False, repr=False)
class ShellStep(Frozen):
    """One batch step given as shell text, run in the batch's own shell (not a subshell).

    For a step that sets a variable a later step of the same batch reads (verify's main PID),
    so what needs it rides the same round trip. Only proofbot's own fixed text goes in
    ``script``: every value from the inventory is shlex-quoted and every value from the host
    checked by the script before use. It must not ``exit``: that would end the batch.
    ``shown`` is the command the result and errors name.
    """

    script: str
    shown: str


BatchStep = Sequence[str] | ShellStep


def shell_text(step: BatchStep) -> str:
    return step.shown if isinstance(step, ShellStep) else shlex.join(step)


def batch_script(nonce: str, commands: Sequence[BatchStep], stop_on_failure: bool = False,
                  cleanup: Sequence[str] = ()) -> str:
    lines = []
    if cleanup:
        removal = shlex.quote(shlex.join(["rm", "-f", "--", *cleanup]))
        lines.append(f"trap {removal} EXIT")
        lines.append("trap 'exit 129' HUP INT TERM PIPE")
    lines.append(f"printf '{nonce} start %s\\n' \"$(date +%s.%N)\"")
    for index, step in enumerate(commands):
        if isinstance(step, ShellStep):
            lines.append(f"{{\n{step.script}\n}} </dev/null 2>&1")
        else:
            lines.append(f"( {shlex.join(step)} ) </dev/null 2>&1")
        lines.append("rc=$?")
        lines.append(f"printf '\\n{nonce} end {index} %s %s\\n' \"$rc\" \"$(date +%s.%N)\"")
        if stop_on_failure:
            lines.append('[ "$rc" -eq 0 ] || exit "$rc"')
    return "\n".join(lines)


def split_batch(nonce: str, commands: list[str], output: bytes) -> list[CommandResult]:
    """Cut a batch's output back into one result per command, in order.

    A command gets a result only when its own end marker (with the nonce, its index, an
    exit status and a time) is there in full; output cut short yields fewer results. A
    marker that is there but malformed raises ``MissingOutput``: never a guessed status.
    """
    marker = nonce.encode()
    start_tag = marker + b" start "
    if not output.startswith(start_tag):
        return []
    first_line_end = output.find(b"\n")
    if first_line_end < 0:
        return []
    previous_time = _as_float(output[len(start_tag) : first_line_end])
    at = first_line_end + 1  # where the next command's output starts (offsets: no copy of the rest per command)
    results: list[CommandResult] = []
    for index, command in enumerate(commands):
        end_tag = b"\n" + marker + b" end %d " % index
        cut = output.find(end_tag, at)
        if cut < 0:
            break
        body = output[at:cut]
        line_end = output.find(b"\n", cut + len(end_tag))
        if line_end < 0:
            break
        fields = output[cut + len(end_tag) : line_end].split()
        if len(fields) != 2 or not EXIT_STATUS.fullmatch(fields[0]):
            shown = output[cut + 1 : line_end][:80].decode("utf-8", "replace")
            raise MissingOutput(f"malformed end marker after `{command[:200]}`: {shown!r}",
                                hint="the batch output is not what proofbot's script prints; nothing is judged")
        exit_status, finished = int(fields[0]), _as_float(fields[1])
        duration = max(0.0, finished - previous_time) if finished and previous_time else 0.0
        results.append(CommandResult(command, exit_status, body, duration))
        previous_time = finished
        at = line_end + 1
    return results


def _as_float(raw: bytes) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        return 0.0
    return value if math.isfinite(value) else 0.0
