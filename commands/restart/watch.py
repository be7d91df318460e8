"""Restart, the watch: a pure state machine fed with polls, which says when every signal is green.

It knows nothing of SSH. Each poll brings the manager's state, a health answer and (for
a new process) its command line; the watch tracks the restart command's outcome, every
main PID seen, and when all signals first turned green. ``progress()`` is what a front-end
shows while waiting; ``commands.restart_verdict`` turns the final watch into findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from commands.checks.cmdline import flag_problems, parse_cmdline
from commands.checks.health import HttpOutcome
from commands.checks.service import ServiceState, main_pid_check
from commands.command_result import CommandResult
from commands.inventory import Service
from commands.restart.container import ContainerLook
from commands.restart.plan import ServiceSnapshot
from commands.restart.runs import ContainerRuns
from commands.vocabulary import CommandState, Signal

Phase = Literal["before", "restarting", "waiting", "probing", "settling", "done"]


@dataclass(frozen=True)
class RestartProgress:
    """One moment of a restart, for front-ends to render (they throttle; this comes often).

    ``elapsed_s`` counts from sending the restart command. The ``*_state`` fields are
    ``pending`` (not yet), ``ok``, ``fail``, ``error`` (cannot tell) or ``n/a``.
    """

    host: str
    operation_id: str
    phase: Phase
    elapsed_s: float
    deadline_s: float
    old_pid: int | None
    current_pid: int | None
    pid_changed: bool
    pid_changes: int
    service_state: str
    command_state: CommandState
    command_exit_status: int | None
    active_state: Signal
    health_status: int | None
    health_state: Signal
    cmdline_state: Signal
    cmdline_problem: str
    probe_state: Signal
    ready_after_s: float | None

    def key(self) -> tuple[object, ...]:
        """What a state change is: everything but the clock."""
        return (self.phase, self.current_pid, self.pid_changes, self.service_state, self.command_state,
                self.active_state, self.health_status, self.cmdline_state, self.probe_state,
                self.ready_after_s is not None)


@dataclass(frozen=True)
class Poll:
    """One poll: one exec round trip (state, maybe a cmdline) and one health request."""

    at_s: float
    state_result: CommandResult
    state: ServiceState | None
    health: HttpOutcome
    cmdline_pid: int | None = None
    cmdline_result: CommandResult | None = None
    look: ContainerLook | None = None  # a container's run, engine-neutral (commands.restart.container)


@dataclass
class CmdlineRead:
    pid: int
    result: CommandResult
    args: list[str]
    missing: list[str]
    forbidden: list[str]
    health_ok: bool  # read in a poll where health answered 200: the process had long exec'd

    @property
    def state(self) -> Signal:
        if self.result.exit_status != 0 or not self.args:
            return Signal.ERROR
        return Signal.FAIL if self.missing or self.forbidden else Signal.OK


@dataclass
class Watch:
    """Everything seen since the restart command was sent; pure, fed by commands.restart."""

    service: Service
    before: ServiceSnapshot
    command: str = ""
    command_state: CommandState = CommandState.NOT_SENT
    command_result: CommandResult | None = None
    command_returned_s: float | None = None
    command_problem: str = ""
    polls: list[Poll] = field(default_factory=list)
    new_pids: list[tuple[int, float]] = field(default_factory=list)  # every new main PID, first seen at
    cmdlines: dict[int, CmdlineRead] = field(default_factory=dict)
    ready_s: float | None = None
    ready_poll: Poll | None = None
    lost: str = ""
    lost_s: float | None = None
    probe_state: Signal = Signal.NOT_APPLICABLE
    runs: ContainerRuns | None = None  # a container: its runs since the request (commands.restart.runs)

    # -- inputs --------------------------------------------------------------------
    def command_done(self, result: CommandResult | None, at_s: float, problem: str = "",
                     state: CommandState | None = None) -> None:
        self.command_result = result
        self.command_returned_s = at_s
        self.command_problem = problem
        if state is not None:
            self.command_state = state
        elif result is None:
            self.command_state = CommandState.LOST
        else:
            self.command_state = CommandState.OK if result.exit_status == 0 else CommandState.FAIL

    def link_lost(self, problem: str, at_s: float) -> None:
        self.lost, self.lost_s = problem, at_s
        if self.command_state == CommandState.RUNNING:
            self.command_done(None, at_s, problem)

    def observe(self, poll: Poll) -> None:
        self.polls.append(poll)
        if self.runs is not None:
            self.runs.observe(poll.at_s, poll.look)
        pid = self.pid_of(poll)
        if self.is_new(poll) and pid is not None and pid not in {seen for seen, _ in self.new_pids}:
            self.new_pids.append((pid, poll.at_s))
        if poll.cmdline_pid is not None and poll.cmdline_result is not None and poll.cmdline_pid == pid:
            self.cmdlines[pid] = _read_cmdline(self.service, poll.cmdline_pid, poll.cmdline_result,
                                               poll.health.status == 200)
        if self.ready_s is None and self.green(poll):
            self.ready_s, self.ready_poll = poll.at_s, poll

    # -- what a poll says ----------------------------------------------------------
    @staticmethod
    def pid_of(poll: Poll) -> int | None:
        return poll.state.main_pid if poll.state else None

    def is_new(self, poll: Poll) -> bool:
        """A new process: a new main PID, and on systemd a new InvocationID (PIDs get reused); a container's:
        a StartedAt later than the request, with a PID > 0."""
        if poll.state is None:
            return False
        if self.runs is not None:
            return self.runs.is_new_process(poll.look)
        return main_pid_check(self.service).is_new(poll.state, self.before.main_pid, self.before.invocation_id)

    def green(self, poll: Poll) -> bool:
        pid = self.pid_of(poll)
        read = self.cmdlines.get(pid) if pid is not None else None
        return (self.command_state == CommandState.OK and self.is_new(poll) and poll.state is not None
                and poll.state.active and poll.health.status == 200 and read is not None and read.state == Signal.OK
                and (self.runs is None or self.runs.stable(poll.look)))

    # -- derived -------------------------------------------------------------------
    @property
    def last(self) -> Poll | None:
        return self.polls[-1] if self.polls else None

    @property
    def new_pid(self) -> int | None:
        """The newest new main PID seen (None: the restart never showed a new process)."""
        return self.new_pids[-1][0] if self.new_pids else None

    @property
    def crash_loop(self) -> bool:
        if self.runs is not None:  # a container's runs say it (a compose recreate's new PID is not a loop)
            return self.runs.crash_loop
        return len(self.new_pids) >= 2

    def crash_loop_since(self) -> float | None:
        """When the crash loop became evident (seconds after the restart command), None: no crash loop."""
        if self.runs is not None:
            return self.runs.loop_seen_s
        return self.new_pids[1][1] if len(self.new_pids) >= 2 else None

    def died_since(self) -> float | None:
        """When the process proven ready was first seen no longer the active main PID (seconds after the restart
        command): it died after turning green, and its manager may be starting the next one; None: not seen so."""
        if self.ready_poll is None or self.runs is not None:  # a container's runs judge its own loop
            return None
        ready_pid, after = self.pid_of(self.ready_poll), False
        for poll in self.polls:
            if after and poll.state is not None and (not poll.state.active or self.pid_of(poll) != ready_pid):
                return poll.at_s
            after = after or poll is self.ready_poll
        return None

    def uptime_due(self) -> float | None:
        """A container's new run, up but not yet ``min_uptime_s``: the seconds it still lacked when the last poll
        read the host's clock (None: no such run)."""
        last = self.last
        if self.runs is None or last is None or last.look is None or not self.runs.is_new_process(last.look):
            return None
        look, run = last.look, self.runs.runs[-1] if self.runs.runs else None
        if not look.up or look.uptime_s is None or run is None or run.down or run.started_at != look.started_at:
            return None
        due = self.runs.min_uptime_s - look.uptime_s
        return due if due > 0 else None

    def gone_since(self) -> float | None:
        """A container's new run seen ended, and not being restarted by its engine: it will not come back by
        itself; when that was first seen (None: not so)."""
        last = self.last
        if self.runs is None or last is None or last.look is None or not self.runs.runs:
            return None
        run = self.runs.runs[-1]
        ended = (not last.look.running and not last.look.restarting and not last.look.will_restart
                 and last.look.started_at == run.started_at)
        return run.down_seen_s if ended and run.down else None

    def cmdline_wanted(self) -> int | None:
        """The PID whose command line the next poll should read: the current new process, until
        a read shows the right flags (a read may catch it before its exec, or catch the wrapper)."""
        last = self.last
        pid = self.pid_of(last) if last else None
        if last is None or pid is None or not self.is_new(last):
            return None
        read = self.cmdlines.get(pid)
        return None if read is not None and read.state == Signal.OK else pid

    def wrong_flags_final(self) -> bool:
        """A new, active, healthy process with the wrong flags: its cmdline will not change."""
        last = self.last
        if last is None or self.command_state != CommandState.OK or not self.is_new(last) or last.state is None:
            return False
        read = self.cmdlines.get(last.state.main_pid or 0)
        return (last.state.active and last.health.status == 200 and read is not None and read.state == Signal.FAIL
                and read.health_ok)

    def progress(self, host: str, operation_id: str, phase: Phase, elapsed_s: float) -> RestartProgress:
        last = self.last
        pid = self.pid_of(last) if last else self.before.main_pid
        read = self.cmdlines.get(pid) if pid is not None else None
        new = bool(last and self.is_new(last))
        if read is not None:
            cmdline_state: Signal = read.state
        else:
            cmdline_state = Signal.PENDING
        problem = ""
        if read is not None and read.state == Signal.FAIL:
            problem = "; ".join([f"missing {f}" for f in read.missing] + [f"{f} present" for f in read.forbidden])
        health = last.health.status if last else None
        return RestartProgress(
            host=host, operation_id=operation_id, phase=phase, elapsed_s=round(elapsed_s, 3),
            deadline_s=self.service.ready_timeout_s, old_pid=self.before.main_pid, current_pid=pid,
            pid_changed=new, pid_changes=len(self.new_pids),
            service_state=last.state.state if last and last.state else "unknown",
            command_state=self.command_state,
            command_exit_status=self.command_result.exit_status if self.command_result else None,
            active_state=Signal.OK if last and last.state and last.state.active and new else Signal.PENDING,
            health_status=health,
            health_state=Signal.OK if health == 200 and new else Signal.PENDING,
            cmdline_state=cmdline_state if new else Signal.PENDING, cmdline_problem=problem,
            probe_state=self.probe_state, ready_after_s=self.ready_s)

    def timeline(self) -> str:
        """Every change of state, health or command, one line each: the evidence of readiness."""
        lines = [f"+{0:7.3f} s  sent: {self.command}"]
        previous: tuple[object, ...] = ()
        command_logged = False
        for poll in self.polls:
            if not command_logged and self.command_returned_s is not None and self.command_returned_s <= poll.at_s:
                lines.append(self._command_line())
                command_logged = True
            pid = self.pid_of(poll)
            read = self.cmdlines.get(pid) if pid is not None else None
            now = (poll.state.state if poll.state else "unreadable", pid, poll.health.status,
                   read.state if read else None)
            if now != previous:
                health = poll.health.status if poll.health.status is not None else "no answer"
                cmdline = f" · cmdline {read.state}" if read else ""
                marker = "  ← all green" if poll is self.ready_poll else ""
                lines.append(f"+{poll.at_s:7.3f} s  {now[0]} pid {pid or '-'}"
                             f"{' (new)' if self.is_new(poll) else ''} · health {health}{cmdline}{marker}")
                previous = now
            elif poll is self.ready_poll:
                lines.append(f"+{poll.at_s:7.3f} s  all green")
        if not command_logged and self.command_returned_s is not None:
            lines.append(self._command_line())
        if self.lost:
            lines.append(f"+{self.lost_s or 0:7.3f} s  link lost: {self.lost}")
        return "\n".join(lines)

    def _command_line(self) -> str:
        at = self.command_returned_s or 0.0
        if self.command_state == CommandState.HUNG:
            return f"+{at:7.3f} s  restart command still running (no exit status)"
        if self.command_result is None:
            return f"+{at:7.3f} s  restart command: no exit status ({self.command_problem})"
        return f"+{at:7.3f} s  restart command exited {self.command_result.exit_status}"


def _read_cmdline(service: Service, pid: int, result: CommandResult, health_ok: bool) -> CmdlineRead:
    args = parse_cmdline(result)
    missing, forbidden = flag_problems(service, args)
    return CmdlineRead(pid, result, args, missing, forbidden, health_ok)
