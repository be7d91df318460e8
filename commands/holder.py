"""Which process runs an operation, and whether it provably no longer does.

Recorded with every request (``Origin.to_json``) and every lock. "Gone" is only ever said
when it can be told for sure: the same machine, and no process with that PID, or one with
that PID that started at another time (the PID was reused). A holder on another machine,
or one this user may not signal, is presumed alive.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, NamedTuple


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot), None when unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


_OWN_START: dict[int, int | None] = {}  # this process's own start time, by its PID


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Holder(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    machine: str
    pid: int
    started: int | None  # clock ticks since boot; guards against a reused PID

    @classmethod
    def current(cls) -> Holder:
        pid = os.getpid()
        if pid not in _OWN_START:  # read once per process (a fork has its own PID): every request records it
            _OWN_START.clear()
            _OWN_START[pid] = _start_ticks(pid)
        return cls(socket.gethostname(), pid, _OWN_START[pid])

    @classmethod
    def from_json(cls, data: Any) -> Holder | None:
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not data.get("machine"):
            return None
        started = data.get("started")
        return cls(str(data["machine"]), int(data["pid"]), started if isinstance(started, int) else None)

    def to_json(self) -> dict[str, Any]:
        return {"machine": self.machine, "pid": self.pid, "started": self.started}

    def is_gone(self) -> bool:
        """True only when it is certain: this machine, and the PID is dead or now another process."""
        if self.machine != socket.gethostname():
            return False
        if not pid_alive(self.pid):
            return True
        now = _start_ticks(self.pid)
        return self.started is not None and now is not None and now != self.started
