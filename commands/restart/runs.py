"""Restart of a container, the proof (pure): every run of the container seen since the restart was sent.

A run is one ``StartedAt``. It is new when it started later than the request (the host's clock just before the
restart command) and later than the planned run; it counts only with a service PID > 0, ``Running`` and not
``Restarting``, and it is stable once it has been up ``min_uptime_s`` by the engine's own clock with no poll
ever seeing it down (a run that stops and starts again is a new ``StartedAt``, so one ``StartedAt`` seen up now
was up all along). Two new runs, or a new run the engine is restarting, is a crash loop, named with the
``ExitCode`` each ended run showed. ``RestartCount`` is never read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commands.clock import utc_at
from commands.restart.container import ContainerLook

SHORT_ID = 12


@dataclass
class Run:
    """One ``StartedAt`` of the container after the request, as the polls saw it."""

    started_at: float
    first_seen_s: float
    container_id: str | None = None
    pid: int | None = None  # the service's PID while it was seen up
    up_seen_s: float | None = None
    down: str = ""  # how a poll saw it after it started, not up: "exited, exit code 1", "restarting, …"
    down_seen_s: float | None = None
    exit_code: int | None = None  # ExitCode while it was seen ended


@dataclass
class ContainerRuns:
    """The runs seen since the restart was sent; fed one look per poll (None: unreadable)."""

    min_uptime_s: float
    before_started_at: float | None
    before_id: str | None = None
    requested_at: float | None = None  # the host's clock just before the restart command was sent
    runs: list[Run] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # every container id seen, in order
    loop_seen_s: float | None = None

    def observe(self, at_s: float, look: ContainerLook | None) -> None:
        if look is None:
            return
        if look.container_id and look.container_id not in self.ids:
            self.ids.append(look.container_id)
        if not self.is_new(look):
            return
        assert look.started_at is not None
        run = next((run for run in self.runs if run.started_at == look.started_at), None)
        if run is None:
            run = Run(look.started_at, at_s, look.container_id)
            self.runs.append(run)
        if look.up and not run.down:
            run.pid = look.pid
            run.up_seen_s = run.up_seen_s if run.up_seen_s is not None else at_s
        elif (look.restarting or not look.running or look.status != "running") and not run.down:
            # running with no service PID yet (an init before its child) is not yet up, not down
            run.down, run.down_seen_s = _down_words(look), at_s
            run.exit_code = look.exit_code if look.restarting or not look.running else None
        if self.loop_seen_s is None and self.crash_loop:
            self.loop_seen_s = at_s

    # -- what a look says ----------------------------------------------------------------------------------
    @property
    def threshold(self) -> float | None:
        """What a new run's StartedAt must be later than: the request, and the planned run."""
        known = [moment for moment in (self.requested_at, self.before_started_at) if moment is not None]
        return max(known) if known else None

    def is_new(self, look: ContainerLook | None) -> bool:
        """A run that started after the request (StartedAt later than it)."""
        threshold = self.threshold
        return (look is not None and look.started_at is not None and threshold is not None
                and look.started_at > threshold)

    def is_new_process(self, look: ContainerLook | None) -> bool:
        """A new run with a new PID > 0 (the container's and the service's)."""
        return self.is_new(look) and look is not None and look.container_pid > 0 and look.pid is not None

    def stable(self, look: ContainerLook | None) -> bool:
        """A new run up, never seen down, up ``min_uptime_s`` by the engine's StartedAt and the host's clock."""
        if look is None or not self.is_new_process(look) or not look.up:
            return False
        run = next((run for run in self.runs if run.started_at == look.started_at), None)
        uptime = look.uptime_s
        return run is not None and not run.down and uptime is not None and uptime >= self.min_uptime_s

    # -- derived -------------------------------------------------------------------------------------------
    @property
    def current(self) -> list[Run]:
        """The runs of the newest container (compose: a recreate starts a container of its own, not a loop)."""
        newest = self.ids[-1] if self.ids else None
        return [run for run in self.runs if run.container_id == newest]

    @property
    def crash_loop(self) -> bool:
        """Two runs since the request, or one the engine is restarting (it ended and will be started again)."""
        runs = self.current
        return len(runs) >= 2 or any(run.down.startswith("restarting") for run in runs)

    @property
    def exit_codes(self) -> list[int]:
        return [run.exit_code for run in self.current if run.exit_code is not None]

    @property
    def recreated(self) -> tuple[str, str] | None:
        """(the planned container id, the newest one) when the labels found another container."""
        newest = self.ids[-1] if self.ids else None
        if self.before_id is None or newest is None or newest == self.before_id:
            return None
        return self.before_id, newest

    def chain(self) -> str:
        """Every run seen, e.g. ``StartedAt 12:00:01.2Z PID 4242 up · 12:00:03.0Z exited, exit code 1``."""
        words = []
        for run in self.runs:
            state = run.down or ("up" if run.up_seen_s is not None else "not yet up")
            pid = f" PID {run.pid}" if run.pid else ""
            words.append(f"{utc_at(run.started_at)}{pid} {state}")
        return " · ".join(words) or "none"

    def loop_words(self) -> str:
        codes = ", ".join(map(str, self.exit_codes)) or "none seen"
        runs = self.current
        span = runs[-1].first_seen_s if runs else 0.0
        return (f"crash loop: {len(runs)} run(s) since the restart within {span:.1f} s, "
                f"exit codes seen: {codes}")

    def recreate_words(self) -> str:
        recreated = self.recreated
        if recreated is None:
            return ""
        return f"container recreated: {recreated[0][:SHORT_ID]} → {recreated[1][:SHORT_ID]} (followed by its labels)"


def _down_words(look: ContainerLook) -> str:
    if look.restarting:
        return f"restarting (Restarting: true, Pid: {look.container_pid}), exit code {look.exit_code}"
    if not look.running:
        return f"{look.status}, exit code {look.exit_code}"
    return f"{look.status} (Pid {look.container_pid}, service PID {look.pid or 'none'})"
