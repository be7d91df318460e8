"""The SSH boundary: one verified connection per host, shared and bounded; commands batched into few round trips.

Every asyncssh and socket failure is mapped here, once, into ``commands.errors``. A
command that comes back without an exit status (the link dropped) is an error, never a
result.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import secrets
import shlex
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncssh

from commands.command_result import CommandResult
from commands.errors import (
    AuthenticationFailed,
    BastionUnreachable,
    CommandTimedOut,
    ConnectionLost,
    CouldNotCheck,
    HostKeyNotVerified,
    HostUnreachable,
    MissingOutput,
    ProofbotError,
)
from commands.inventory import Hop, Host, SshSettings
from commands.ssh_options import HostKeyRefused, client_options, host_trust

KEEPALIVE_INTERVAL_S = 2
KEEPALIVE_COUNT_MAX = 3
MIB = 1024 * 1024
MAX_OUTPUT_BYTES = 16 * MIB  # per exec channel: far above any batch proofbot sends, far below the bot's memory
READ_CHUNK = 65536
EXIT_STATUS = re.compile(rb"[0-9]{1,3}")  # what sh's $? prints: 0..255
# A session refused for want of a slot is tried again: OpenSSH 9.2 answers a session past MaxSessions
# with "connect failed: open failed" (also for a moment after a session closed, before sshd freed it);
# others say "administratively prohibited" or "resource shortage". Only sessions: sshd refuses
# nothing else that way for a limit.
SESSION_RETRY_CODES = (asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, asyncssh.OPEN_CONNECT_FAILED,
                       asyncssh.OPEN_RESOURCE_SHORTAGE)
RETRY_FIRST_S = 0.02
RETRY_MAX_S = 0.5
BASTION_LINGER_S = 1.0  # an unused bastion connection waits this long for the next host before closing


@dataclass(frozen=True)
class ShellStep:
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


def _shell_text(step: BatchStep) -> str:
    return step.shown if isinstance(step, ShellStep) else shlex.join(step)


class HostConnection:
    """One operation's use of an open, host-key-verified SSH connection to one inventory host."""

    def __init__(self, host: Host, shared: _Shared) -> None:
        self.host = host
        self._shared = shared
        self._conn = shared.conn
        self.exec_round_trips = 0  # this operation's own, even on a shared connection

    @property
    def refused_sessions(self) -> int:
        """Sessions sshd refused on this connection (past its MaxSessions) that were tried again."""
        return self._shared.refused_sessions

    def host_key_fingerprint(self) -> str:
        """The SHA256 fingerprint of the key the host proved it holds (already checked against known_hosts)."""
        key = self._conn.get_server_host_key()
        return str(key.get_fingerprint("sha256")) if key is not None else "unknown"

    async def run(self, argv: Sequence[str], *, stdin: bytes | None = None,
                  timeout_s: float | None = None) -> CommandResult:
        """Run one command (argv, quoted here) and return its result.

        ``timeout_s`` replaces the inventory's command_timeout_s for a command that may
        legitimately take longer (a restart waits up to the service's ready_timeout_s).
        """
        command = shlex.join(argv)
        started = time.monotonic()
        output, exit_status = await self._exec(command, stdin, timeout_s)
        return CommandResult(command, exit_status, output, time.monotonic() - started)

    async def run_batch(self, commands: Sequence[BatchStep], *, stop_on_failure: bool = False,
                        cleanup: Sequence[str] = ()) -> list[CommandResult]:
        """Run several commands in ONE exec round trip, each result kept apart.

        Each command's output is framed by markers carrying a per-call random nonce, so
        nothing a command prints can forge another command's result or exit status. The
        script (and so the nonce) goes to ``sh -s`` on stdin, never in an argv that any user
        on the host can read in /proc while the batch runs; each command's stdin is /dev/null. With
        stop_on_failure the batch ends at the first non-zero exit (the results then stop
        there); ``cleanup`` paths are removed by the remote shell however it exits,
        including when the link drops and sshd hangs up on it. A ``ShellStep`` runs in the
        batch's own shell, so a variable it sets is there for the steps after it.
        """
        if not commands:
            return []
        nonce = secrets.token_hex(8)
        script = _batch_script(nonce, commands, stop_on_failure, cleanup)
        shown_each = [_shell_text(step) for step in commands]
        output, exit_status = await self._exec("sh -s", script.encode(), shown="; ".join(shown_each))
        try:
            results = _split_batch(nonce, shown_each, output)
        except MissingOutput as exc:
            raise MissingOutput(f"{self.host.name}: {exc.message}", hint=exc.hint) from None
        if stop_on_failure and results and results[-1].exit_status != 0:
            return results
        if len(results) < len(commands):
            lost = shown_each[len(results)]
            raise ConnectionLost(
                f"{self.host.name}: batch ended (exit {exit_status}) before `{lost}` reported",
                hint="the host may have killed the session; run verify again",
            )
        return results

    async def open_tcp(self, dest_host: str, dest_port: int) -> TcpChannel:
        """A direct-tcpip channel to dest_host:dest_port as seen FROM the host.

        Nothing listens on the bot's machine: the stream exists only inside this SSH
        connection, so no local user can ride it to the host's loopback.
        """
        try:
            reader, writer = await self._conn.open_connection(dest_host, dest_port, encoding=None)
        except (OSError, asyncssh.Error) as exc:
            raise self._lost(_map_error(self.host, exc)) from exc
        return TcpChannel(self, reader, writer)

    async def _exec(self, command: str, stdin: bytes | None, timeout_s: float | None = None, *,
                    shown: str | None = None) -> tuple[bytes, int]:
        """Run command; ``shown`` is what errors name (a batch's commands, not ``sh -s``).

        The output is read as it comes, at most ``MAX_OUTPUT_BYTES``: a host that prints
        without end cannot exhaust the bot's memory; past the cap the channel is closed and
        the command is an error saying so.
        """
        self.exec_round_trips += 1
        shown = shown or command
        timeout = timeout_s if timeout_s is not None else self.host.ssh.command_timeout_s
        async with self._shared.sessions:  # never more sessions than sshd's MaxSessions allows
            return await self._exec_in_session(command, stdin, timeout, shown)

    async def _exec_in_session(self, command: str, stdin: bytes | None, limit_s: float,
                               shown: str) -> tuple[bytes, int]:
        timeout = limit_s
        process: asyncssh.SSHClientProcess[bytes] | None = None
        refused: list[asyncssh.ChannelOpenError] = []
        try:
            async with asyncio.timeout(timeout):
                process = await self._open_session(command, refused)
                if stdin:
                    process.stdin.write(stdin)
                process.stdin.write_eof()
                output = await _read_capped(process.stdout, MAX_OUTPUT_BYTES)
                if output is None:
                    raise CouldNotCheck(
                        f"{self.host.name}: output passed {MAX_OUTPUT_BYTES // MIB} MiB, stopped reading: "
                        f"{shown[:200]}",
                        hint="nothing was judged from it; a command proofbot runs prints far less",
                    )
                completed = await process.wait()
        except TimeoutError:
            if process is None and refused:
                where = f"{self.host.name} ({self.host.address}:{self.host.port})"
                raise HostUnreachable(
                    f"{where}: sshd refused a session channel {len(refused)} times in {timeout:g} s: "
                    f"{refused[-1].reason}",
                    hint="its MaxSessions may be lower than ssh.max_sessions: lower ssh.max_sessions for this host",
                ) from None
            raise CommandTimedOut(
                f"{self.host.name}: command did not finish within {timeout:g} s: {shown[:200]}",
                hint="raise ssh.command_timeout_s in the inventory if this is expected",
            ) from None
        except (OSError, asyncssh.Error) as exc:
            raise self._lost(_map_error(self.host, exc)) from exc
        finally:
            if process is not None and process.exit_status is None:
                process.close()
        if completed.exit_status is None:
            raise self._lost(ConnectionLost(
                f"{self.host.name}: connection lost, no exit status for: {shown[:200]}",
                hint="nothing is known about that command's effect; check the host and retry",
            ))
        return output, int(completed.exit_status)

    async def _open_session(self, command: str, refused: list[asyncssh.ChannelOpenError]
                            ) -> asyncssh.SSHClientProcess[bytes]:
        """An exec session; one refused for want of a slot is tried again with backoff until the caller's deadline."""
        delay = RETRY_FIRST_S
        while True:
            try:
                return await self._conn.create_process(command, encoding=None, stderr=asyncssh.STDOUT)
            except asyncssh.ChannelOpenError as exc:
                if exc.code not in SESSION_RETRY_CODES or self._conn.is_closed():
                    raise
                refused.append(exc)
                self._shared.refused_sessions += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def _lost(self, error: ProofbotError) -> ProofbotError:
        """Pass error on; a connection that dropped is never handed to another operation."""
        if self._conn.is_closed() and not isinstance(error, ConnectionLost):
            # asyncssh says "channel refused" on a closed connection: the link is what failed.
            where = f"{self.host.name} ({self.host.address}:{self.host.port})"
            error = ConnectionLost(f"{where}: connection lost ({error.message.removeprefix(where + ': ')})")
        if isinstance(error, ConnectionLost):
            self._shared.usable = False
        return error


class TcpChannel:
    """One direct-tcpip channel: bytes in and out, every failure mapped into ``commands.errors``."""

    def __init__(self, owner: HostConnection, reader: asyncssh.SSHReader[bytes],
                 writer: asyncssh.SSHWriter[bytes]) -> None:
        self._owner = owner
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int) -> bytes:
        """Up to max_bytes; b"" once the far end has closed."""
        try:
            return await self._reader.read(max_bytes)
        except (OSError, asyncssh.Error) as exc:
            raise self._owner._lost(_map_error(self._owner.host, exc)) from exc

    async def write(self, data: bytes) -> None:
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (OSError, asyncssh.Error) as exc:
            raise self._owner._lost(_map_error(self._owner.host, exc)) from exc

    def write_eof(self) -> None:
        try:
            self._writer.write_eof()
        except (OSError, asyncssh.Error):
            pass  # already closed: the far end has what it will get

    def close(self) -> None:
        self._writer.close()


async def _read_capped(stream: asyncssh.SSHReader[bytes], cap: int) -> bytes | None:
    """Everything stream sends until EOF, or None as soon as it passes cap bytes."""
    chunks: list[bytes] = []
    total = 0
    while data := await stream.read(READ_CHUNK):
        total += len(data)
        if total > cap:
            return None
        chunks.append(data)
    return b"".join(chunks)


class _Shared:
    """One SSH connection and how many operations use it; ``usable`` goes False once it dropped."""

    def __init__(self, conn: asyncssh.SSHClientConnection, max_sessions: int) -> None:
        self.conn = conn
        self.users = 0
        self.usable = True
        self.sessions = asyncio.Semaphore(max_sessions)
        self.refused_sessions = 0  # sessions sshd refused and that were tried again

    def reusable(self) -> bool:
        return self.usable and not self.conn.is_closed()


class _Registry:
    """Per event loop: the connection each host and each bastion chain shares, and how many are open.

    ``open`` counts host connections (``ssh.max_connections``); a bastion connection is one per
    chain of hops, so never more than the inventory names, and it must never wait behind the
    hosts that need it. ``startups`` bounds the handshakes in flight per sshd (``max_startups``).
    """

    def __init__(self) -> None:
        self.current: dict[str, _Shared] = {}
        self.opening: dict[str, asyncio.Lock] = {}
        self.failed: dict[str, tuple[int, ProofbotError, float]] = {}
        self.attempts: dict[str, int] = {}
        self.open = 0
        self.slots = asyncio.Condition()
        self.startups: dict[str, asyncio.Semaphore] = {}
        self.lingering: set[asyncio.Task[None]] = set()
        self.ahead: dict[str, _Ahead] = {}


_registries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Registry] = weakref.WeakKeyDictionary()


def open_connections() -> int:
    """SSH connections open now in this event loop (all hosts)."""
    registry = _registries.get(asyncio.get_running_loop())
    return registry.open if registry else 0


@asynccontextmanager
async def connect(host: Host) -> AsyncIterator[HostConnection]:
    """A host-key-verified SSH connection to host, shared with every operation on it that overlaps.

    Operations on one host at the same time share one connection (one login); it is closed
    when the last of them leaves, and one that dropped is never handed out again. Opening a
    connection waits while ``ssh.max_connections`` are open in all. A host behind
    ``ssh.jump`` is reached through one connection to the bastion shared by every host behind
    it, opened on first use and closed when the last of them is done. A connection opened
    ahead (``connect_ahead``) is taken over, or its failure raised, without a second attempt.
    """
    registry = _registries.setdefault(asyncio.get_running_loop(), _Registry())
    ahead = registry.ahead.pop(_host_key(host), None)
    try:
        if ahead is not None:
            await ahead.settled.wait()
            if ahead.error is not None:
                raise type(ahead.error)(ahead.error.message, hint=ahead.error.hint)
        async with _connected(registry, host) as conn:
            if ahead is not None:
                ahead.taken.set()  # this operation holds the connection now; the one ahead lets go
            yield conn
    finally:  # also when cancelled while waiting (a fleet's host deadline): the one ahead lets go now
        if ahead is not None:
            ahead.taken.set()


def _host_key(host: Host) -> str:
    return host.model_dump_json(include={"name", "address", "port", "ssh"})


@asynccontextmanager
async def _connected(registry: _Registry, host: Host) -> AsyncIterator[HostConnection]:
    async with _through(registry, host.ssh.jump) as tunnel:
        key = _host_key(host)
        shared = await _acquire(registry, key, host.ssh.max_sessions,
                                lambda: _open_counted(registry, host, tunnel))
        try:
            yield HostConnection(host, shared)
        finally:
            await _release(registry, key, shared, counted=True)


class _Ahead:
    """A connection being opened before the operation that will use it asks for it."""

    def __init__(self) -> None:
        self.settled = asyncio.Event()  # open, or failed
        self.taken = asyncio.Event()  # the operation has it (or gave up on it)
        self.error: ProofbotError | None = None
        self.task: asyncio.Task[None] | None = None


AHEAD_HOLD_S = 30.0  # a connection opened ahead that nobody takes is closed after this


def connect_ahead(hosts: Sequence[Host]) -> None:
    """Start opening the connections these hosts' operation is about to ask ``connect`` for.

    A CLI command calls it as soon as it knows its hosts, so the SSH handshake (a login, no
    command) runs while the command loads the rest of itself and opens the audit log.
    ``connect`` then takes the connection over, or raises its error: never a second attempt.
    Only a login happens ahead: nothing runs on a host before its operation is recorded.
    """
    registry = _registries.setdefault(asyncio.get_running_loop(), _Registry())
    for host in hosts:
        key = _host_key(host)
        if key not in registry.ahead:
            ahead = registry.ahead[key] = _Ahead()
            ahead.task = asyncio.create_task(_hold_ahead(registry, host, ahead))


async def _hold_ahead(registry: _Registry, host: Host, ahead: _Ahead) -> None:
    """Open and hold the connection until the operation takes it; a failure is kept for it as long."""
    try:
        async with _connected(registry, host):
            ahead.settled.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(AHEAD_HOLD_S):
                    await ahead.taken.wait()
    except ProofbotError as exc:
        ahead.error = exc
        ahead.settled.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(AHEAD_HOLD_S):
                await ahead.taken.wait()
    finally:
        ahead.settled.set()
        if registry.ahead.get(_host_key(host)) is ahead:
            del registry.ahead[_host_key(host)]


@asynccontextmanager
async def _through(registry: _Registry, hops: tuple[Hop, ...]
                   ) -> AsyncIterator[asyncssh.SSHClientConnection | None]:
    """The shared connection to the last of hops (each reached through the ones before), or None."""
    if not hops:
        yield None
        return
    async with _through(registry, hops[:-1]) as tunnel:
        key = _chain_key(hops)
        # A bastion that failed is not tried again for connect_timeout_s: a fleet's hosts all get
        # that one error (said once, naming the bastion), not one attempt each.
        shared = await _acquire(registry, key, hops[-1].ssh.max_sessions,
                                lambda: _open_hop(registry, hops, tunnel), remember_s=hops[-1].ssh.connect_timeout_s)
        try:
            yield shared.conn
        finally:
            if shared.users == 1 and shared.reusable():
                # The last host behind it is done: kept a moment for the next host of the same run
                # (a fleet one host at a time, a rolling restart), then closed.
                shared.users -= 1
                registry.lingering.add(asyncio.create_task(_linger(registry, key, shared)))
            else:
                await _release(registry, key, shared, counted=False)


def _chain_key(hops: tuple[Hop, ...]) -> str:
    """Hops that log in the same way share one connection, whichever hosts they lead to."""
    not_login = {"jump", "connect_timeout_s", "command_timeout_s", "max_connections", "max_startups", "max_sessions"}
    return "jump " + " ".join(f"{hop.ssh.model_dump_json(exclude=not_login)}@{hop.address}:{hop.port}" for hop in hops)


async def _acquire(registry: _Registry, key: str, max_sessions: int,
                   opener: Callable[[], Awaitable[asyncssh.SSHClientConnection]], remember_s: float = 0) -> _Shared:
    seen_attempts = registry.attempts.get(key, 0)
    # One open per key at a time: whoever waited here shares what the first opened, or its failure.
    async with registry.opening.setdefault(key, asyncio.Lock()):
        shared = registry.current.get(key)
        if shared is None or not shared.reusable():
            failed = registry.failed.get(key)
            if failed and (failed[0] > seen_attempts or time.monotonic() - failed[2] < remember_s):
                raise type(failed[1])(failed[1].message, hint=failed[1].hint)
            registry.attempts[key] = attempt = registry.attempts.get(key, 0) + 1
            try:
                shared = _Shared(await opener(), max_sessions)
            except ProofbotError as exc:
                registry.failed[key] = (attempt, exc, time.monotonic())
                raise
            registry.failed.pop(key, None)
            registry.current[key] = shared
        shared.users += 1
        return shared


async def _release(registry: _Registry, key: str, shared: _Shared, *, counted: bool) -> None:
    shared.users -= 1
    if shared.users == 0:
        if registry.current.get(key) is shared:
            del registry.current[key]
        await _close(shared.conn)
        if counted:
            async with registry.slots:
                registry.open -= 1
                registry.slots.notify_all()


async def _linger(registry: _Registry, key: str, shared: _Shared) -> None:
    """Close an unused bastion connection after BASTION_LINGER_S, unless a host took it meanwhile."""
    try:
        await asyncio.sleep(BASTION_LINGER_S)
    finally:
        registry.lingering.discard(asyncio.current_task())
        if shared.users == 0:
            if registry.current.get(key) is shared:
                del registry.current[key]
            shared.conn.close()  # not awaited: this may run as the event loop shuts down


async def _open_counted(registry: _Registry, host: Host,
                        tunnel: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
    async with registry.slots:
        await registry.slots.wait_for(lambda: registry.open < host.ssh.max_connections)
        registry.open += 1
    try:
        return await _open(registry, host, tunnel, host.ssh.jump)
    except BaseException:
        async with registry.slots:
            registry.open -= 1
            registry.slots.notify_all()
        raise


# sshd counts a connection as a startup until its listener reads the child's "logged in" message, a
# moment after the client sees the login succeed: a bound of exactly MaxStartups drew a drop in 1 run of 3.
STARTUP_MARGIN = 2


def _startup_slot(registry: _Registry, sshd: str, settings: SshSettings) -> asyncio.Semaphore:
    """At most ``max_startups`` less a margin handshakes in flight to one sshd: past MaxStartups, sshd
    drops at random."""
    return registry.startups.setdefault(sshd, asyncio.Semaphore(max(1, settings.max_startups - STARTUP_MARGIN)))


async def _open(registry: _Registry, host: Host | Hop,
                tunnel: asyncssh.SSHClientConnection | None, via: tuple[Hop, ...] = ()
                ) -> asyncssh.SSHClientConnection:
    """Open one SSH connection to host (through tunnel, the connection to via[-1]) with its key checked."""
    settings = host.ssh
    sshd = " ".join(f"{hop.address}:{hop.port}" for hop in (*via, host))
    try:
        # known_hosts is read before a handshake slot is taken: a slot is only held while sshd counts it
        trust = await asyncio.to_thread(host_trust, host)
        async with _startup_slot(registry, sshd, settings), client_options(host, time.time(), trust) as options:
            options |= {"connect_timeout": settings.connect_timeout_s,
                        "keepalive_interval": KEEPALIVE_INTERVAL_S, "keepalive_count_max": KEEPALIVE_COUNT_MAX}
            return await asyncio.wait_for(
                asyncssh.connect(host.address, host.port, tunnel=tunnel or (), **options),
                timeout=settings.connect_timeout_s + 1,
            )
    except TimeoutError:
        raise HostUnreachable(
            f"{host.name} ({host.address}:{host.port}): no SSH answer within "
            f"{settings.connect_timeout_s:g} s",
            hint="check the address, the network path and that sshd runs",
        ) from None
    except asyncssh.ChannelOpenError as exc:
        if not via:
            raise _map_error(host, exc) from exc
        raise HostUnreachable(
            f"{host.name} ({host.address}:{host.port}): the bastion {via[-1].name} could not connect to it: "
            f"{exc.reason}",
            hint="check the address as the bastion sees it, and that sshd runs",
        ) from exc
    except (OSError, asyncssh.Error, ValueError) as exc:
        raise _map_error(host, exc) from exc


async def _open_hop(registry: _Registry, hops: tuple[Hop, ...],
                    tunnel: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
    """The connection to hops[-1]; any failure is one ``BastionUnreachable`` naming the bastion."""
    hop = hops[-1]
    try:
        return await _open(registry, hop, tunnel, hops[:-1])
    except ProofbotError as exc:
        where = f"{hop.name} ({hop.address}:{hop.port})"
        through = f" through {', '.join(h.name for h in hops[:-1])}" if len(hops) > 1 else ""
        raise BastionUnreachable(
            f"could not reach the bastion {where}{through}: "
            f"{exc.message.removeprefix(where + ': ').removeprefix(hop.name + ': ')}",
            hint=(exc.hint + "; " if exc.hint else "") + "no host behind it was checked",
        ) from exc


async def _close(conn: asyncssh.SSHClientConnection) -> None:
    conn.close()
    try:
        await asyncio.wait_for(conn.wait_closed(), timeout=2)
    except (TimeoutError, OSError, asyncssh.Error):
        pass


def _map_error(host: Host | Hop, exc: BaseException) -> ProofbotError:
    where = f"{host.name} ({host.address}:{host.port})"
    if isinstance(exc, HostKeyRefused):
        # proofbot's own decision (commands.known_hosts): the reason names the file:line and what was wrong
        return HostKeyNotVerified(
            f"{where}: host key not verified against {', '.join(host.ssh.known_hosts_list())}: {exc.decision.reason}",
            hint=exc.decision.hint)
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        # asyncssh's check after proofbot accepted: never expected (its sets are a superset of the decision's)
        return HostKeyNotVerified(
            f"{where}: host key not verified against {', '.join(host.ssh.known_hosts_list())}: {exc.reason}",
            hint="nothing was trusted; verify the host's key out of band",
        )
    if isinstance(exc, asyncssh.PermissionDenied):
        return AuthenticationFailed(
            f"{where}: user {host.ssh.user} was refused: {exc.reason}",
            hint="check ssh.client_keys and the host's authorized_keys",
        )
    if isinstance(exc, asyncssh.ChannelOpenError):
        return HostUnreachable(f"{where}: the host refused a channel: {exc.reason}")
    if isinstance(exc, asyncssh.DisconnectError | asyncssh.ConnectionLost):
        return ConnectionLost(f"{where}: connection lost: {exc.reason}")
    if isinstance(exc, ValueError):
        return HostKeyNotVerified(f"{where}: cannot use SSH settings: {exc}")
    if isinstance(exc, OSError):
        detail = exc.strerror or str(exc) or type(exc).__name__
        return HostUnreachable(f"{where}: cannot connect: {detail}",
                               hint="check the address, the network path and that sshd runs")
    return ConnectionLost(f"{where}: SSH error: {exc}")


def _batch_script(nonce: str, commands: Sequence[BatchStep], stop_on_failure: bool = False,
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


def _split_batch(nonce: str, commands: list[str], output: bytes) -> list[CommandResult]:
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
    rest = output[first_line_end + 1 :]
    results: list[CommandResult] = []
    for index, command in enumerate(commands):
        end_tag = b"\n" + marker + b" end %d " % index
        cut = rest.find(end_tag)
        if cut < 0:
            break
        body = rest[:cut]
        line_end = rest.find(b"\n", cut + len(end_tag))
        if line_end < 0:
            break
        fields = rest[cut + len(end_tag) : line_end].split()
        if len(fields) != 2 or not EXIT_STATUS.fullmatch(fields[0]):
            shown = rest[cut + 1 : line_end][:80].decode("utf-8", "replace")
            raise MissingOutput(f"malformed end marker after `{command[:200]}`: {shown!r}",
                                hint="the batch output is not what proofbot's script prints; nothing is judged")
        exit_status, finished = int(fields[0]), _as_float(fields[1])
        duration = max(0.0, finished - previous_time) if finished and previous_time else 0.0
        results.append(CommandResult(command, exit_status, body, duration))
        previous_time = finished
        rest = rest[line_end + 1 :]
    return results


def _as_float(raw: bytes) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        return 0.0
    return value if math.isfinite(value) else 0.0
