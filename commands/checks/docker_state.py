"""A container's state as read ON THE HOST in one step: ``docker inspect`` or ``podman inspect`` (the same
template and the same parser for both engines; only the fields proofbot judges: no environment, no labels),
then, when the container's PID is an init (``--init``: docker-init, tini, Podman's catatonit), that init's
children from /proc, then the host's clock; and the pure parser of what that step printed.

The step runs in the batch's own shell (``commands.checks.pid_read``): the PID kept in ``$pb_pid`` for the
cmdline read after it is the service's (the init's one child), taken only from digits the engine and /proc
printed, and the pure parser here must read the same PID from the printed text, or nothing is judged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from commands.checks.check import Script
from commands.checks.engine_guard import guarded, shown
from commands.checks.pid_read import state_script
from commands.command_result import CommandResult
from commands.inventory import Service
from commands.inventory.containers import Engine

# One JSON value per line: the State object, HostConfig.Init (true, false or null), the network mode, the
# networks (each with the container's address on it), the published ports, the restart policy's name and the
# engine's count of its policy's restarts (only ever to name a crash loop: it does not count `docker restart`,
# moby#37596, so it is never evidence that a restart happened).
_FIELDS = (".State", ".HostConfig.Init", ".HostConfig.NetworkMode", ".NetworkSettings.Networks",
           ".HostConfig.PortBindings", ".HostConfig.RestartPolicy.Name", ".RestartCount")
INSPECT_FORMAT = '{{"\\n"}}'.join(f"{{{{json {field}}}}}" for field in _FIELDS)
# An init's comm: the service is its one child (Podman runs catatonit as /run/podman-init: comm podman-init).
INITS = ("docker-init", "tini", "catatonit", "podman-init")
RESTARTING_POLICIES = ("always", "on-failure", "unless-stopped")  # the engine starts it again after an exit
# State.Pid from the first line only (a JSON key can only be written "Pid": unescaped as a key).
_PID_FILTER = "sed -n '1s/^{.*\"Pid\":\\([0-9][0-9]*\\),.*$/\\1/p'"
_INIT_LINE = re.compile(r"^init (\d+) ([A-Za-z0-9._-]*) children: ([0-9 ]*)$")
_NOW_LINE = re.compile(r"^now ([0-9]+(?:\.[0-9]+)?)$")
NO_SUCH = ("No such object", "No such container", "no such container")  # Docker's words, then Podman's


def inspect_argv(service: Service) -> list[str]:
    engine = service.engine or Engine()
    return [*engine.argv(), "inspect", "--type", "container", "--format", INSPECT_FORMAT, service.unit]


def pid_filter() -> str:
    return _PID_FILTER


def state_step(service: Service, inspect: str | None = None) -> Script:
    """``docker inspect``, the init's children when the PID is an init, and the host's clock, in one step
    whose exit status is the engine's. ``inspect``: shell text run instead of inspect_argv (compose's, of the
    container its labels found; it runs the engine through ``engine_guard`` too)."""
    # The engine runs as the SSH user, root on most hosts: only a CLI root alone can change (engine_guard).
    base = state_script(guarded(inspect_argv(service)), _PID_FILTER, inspect)
    inits = "|".join(INITS)
    init = "\n".join([
        'if [ -n "$pb_pid" ]; then',
        "  pb_comm=$(head -c 16 \"/proc/$pb_pid/comm\" 2>/dev/null | tr -cd 'A-Za-z0-9._-')",
        f'  case "$pb_comm" in {inits}) pb_init=1 ;; *) pb_init= ;; esac',
        "  [ \"$(printf '%s\\n' \"$pb_state\" | sed -n 2p)\" = true ] && pb_init=1",
        '  if [ -n "$pb_init" ]; then',
        "    pb_kids=$(tr -cd '0-9 ' < \"/proc/$pb_pid/task/$pb_pid/children\" 2>/dev/null)",
        "    printf 'init %s %s children: %s\\n' \"$pb_pid\" \"$pb_comm\" \"$pb_kids\"",
        "    pb_pid=$(printf '%s\\n' \"$pb_kids\" | awk 'NF == 1 { print $1 }')",
        "    case $pb_pid in ''|0*|*[!0-9]*) pb_pid= ;; esac",
        "  fi",
        "fi",
        "printf 'now %s\\n' \"$(date +%s.%N)\"",
        "(exit $pb_status)",
    ])
    return Script(base.text + "\n" + init, shown(inspect_argv(service)))


@dataclass(frozen=True)
class DockerState:
    """What the engine said of the container, and what /proc said of its init."""

    status: str  # State.Status: running, restarting, exited, paused, created, dead; Podman also stopped
    running: bool
    restarting: bool
    paused: bool
    pid: int  # State.Pid: the container's PID 1 on the host (0: none)
    exit_code: int
    started_at: float | None
    finished_at: str
    init_flag: bool  # HostConfig.Init
    network_mode: str
    init_pid: int | None = None  # set when State.Pid is an init (its comm or --init)
    init_comm: str = ""
    children: tuple[int, ...] = ()
    host_now: float | None = None
    addresses: dict[str, str] = field(default_factory=dict)  # network -> the container's address on it
    published: frozenset[int] = frozenset()  # host ports a container port is published on
    restart_policy: str = ""  # HostConfig.RestartPolicy.Name ("" or "no": none)
    restart_count: int = 0  # the engine's count of its policy's restarts: names a crash loop, proves nothing

    @property
    def between_runs(self) -> bool:
        """Stopped with Pid 0 after a failing exit, under a policy that has restarted it: Podman 4.3's crash loop
        (it restarts at once, no backoff, and reads ``stopped, Pid 0`` between runs; Docker says Restarting)."""
        return (not self.running and not self.pid and self.exit_code != 0 and self.restart_count > 0
                and self.restart_policy in RESTARTING_POLICIES)

    @property
    def service_pid(self) -> int | None:
        """The service's PID: the init's one child, or the container's PID itself; None when there is none."""
        if self.init_pid is not None:
            return self.children[0] if len(self.children) == 1 else None
        return self.pid or None

    @property
    def up(self) -> bool:
        return self.running and not self.restarting and not self.paused and self.service_pid is not None

    @property
    def uptime_s(self) -> float | None:
        if self.started_at is None or self.host_now is None:
            return None
        return self.host_now - self.started_at


def engine_words(result: CommandResult) -> str:
    """What the engine itself printed (not the lines the step adds), on one line, bounded."""
    own = [line for line in result.text.splitlines() if not (_INIT_LINE.match(line) or _NOW_LINE.match(line))]
    return " ".join(" ".join(own).split())[:200]


def no_such_container(result: CommandResult) -> bool:
    return result.exit_status != 0 and any(words in result.text for words in NO_SUCH)


def parse_docker_state(result: CommandResult) -> DockerState | None:
    """The state from the step's output (pure); None when it holds no State object."""
    lines = result.text.splitlines()
    first = next((index for index, line in enumerate(lines) if line.startswith("{")), None)
    if first is None or len(lines) < first + len(_FIELDS):
        return None
    try:
        state, init_flag, mode, networks, ports, policy, count = (
            json.loads(line) for line in lines[first:first + len(_FIELDS)])
    except json.JSONDecodeError:
        return None
    if not isinstance(state, dict) or not isinstance(state.get("Pid"), int) or "Running" not in state:
        return None
    init_pid: int | None = None
    comm, children, now = "", tuple[int, ...](), None
    for line in lines[first + len(_FIELDS):]:
        if match := _INIT_LINE.match(line):
            init_pid, comm, children = int(match.group(1)), match.group(2), tuple(map(int, match.group(3).split()))
        elif match := _NOW_LINE.match(line):
            now = float(match.group(1))
    return DockerState(
        status=str(state.get("Status", "?")), running=state.get("Running") is True,
        restarting=state.get("Restarting") is True, paused=state.get("Paused") is True, pid=state["Pid"],
        exit_code=int(state.get("ExitCode") or 0), started_at=_epoch(state.get("StartedAt")),
        finished_at=str(state.get("FinishedAt", "")), init_flag=init_flag is True,
        network_mode=mode if isinstance(mode, str) else "", init_pid=init_pid, init_comm=comm, children=children,
        host_now=now, addresses=_addresses(networks), published=_published(ports),
        restart_policy=policy if isinstance(policy, str) else "",
        restart_count=count if isinstance(count, int) and not isinstance(count, bool) else 0)


def _addresses(networks: object) -> dict[str, str]:
    """Each network's name and the container's IPv4 address on it (none while it is not running)."""
    if not isinstance(networks, dict):
        return {}
    found = {name: net.get("IPAddress") for name, net in networks.items() if isinstance(net, dict)}
    return {str(name): address for name, address in found.items() if isinstance(address, str) and address}


def _published(ports: object) -> frozenset[int]:
    """The host ports the container's ports are published on (``-p``)."""
    if not isinstance(ports, dict):
        return frozenset()
    return frozenset(int(binding["HostPort"]) for bindings in ports.values() if isinstance(bindings, list)
                     for binding in bindings if isinstance(binding, dict)
                     and str(binding.get("HostPort", "")).isdigit())


def _epoch(written: object) -> float | None:
    """RFC 3339 with nanoseconds (both engines'), as epoch seconds; the zero time is None."""
    if not isinstance(written, str) or written.startswith("0001-"):
        return None
    try:
        return datetime.fromisoformat(written).timestamp()
    except ValueError:
        return None
