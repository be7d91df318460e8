"""One operation's use of a shared, verified SSH connection: exec sessions (retried while sshd has no slot,
output capped, no exit status an error), batches in one round trip, and direct-tcpip channels."""

from __future__ import annotations

import asyncio
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import asyncssh

from commands.command_result import CommandResult
from commands.errors import ConnectionLost, MissingOutput, ProofbotError
from commands.ssh.batch import BatchStep, batch_script, shell_text, split_batch
from commands.ssh.failures import (
    SSH_FAILURES,
    At,
    Step,
    as_error,
    batch_cut_short,
    batch_unreadable,
    no_exit_status,
    output_over_cap,
)

if TYPE_CHECKING:
    from commands.inventory import Host

MIB = 1024 * 1024
MAX_OUTPUT_BYTES = 16 * MIB  # per exec channel: far above any batch proofbot sends, far below the bot's memory
READ_CHUNK = 65536
# A session refused for want of a slot is tried again: OpenSSH 9.2 answers a session past MaxSessions
# with "connect failed: open failed" (also for a moment after a session closed, before sshd freed it);
# others say "administratively prohibited" or "resource shortage". Only sessions: sshd refuses
# nothing else that way for a limit.
SESSION_RETRY_CODES = (asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, asyncssh.OPEN_CONNECT_FAILED,
                       asyncssh.OPEN_RESOURCE_SHORTAGE)
RETRY_FIRST_S = 0.02
RETRY_MAX_S = 0.5


class Shared:
    """One SSH connection and how many operations use it; ``usable`` goes False once it dropped."""

    def __init__(self, conn: asyncssh.SSHClientConnection, max_sessions: int) -> None:
        self.conn = conn
        self.users = 0
        self.usable = True
        self.sessions = asyncio.Semaphore(max_sessions)
        self.refused_sessions = 0  # sessions sshd refused and that were tried again
        # The pool's (commands/ssh/pool.py): the bastion connections this one goes through, held while it
        # is open; how long it may stay idle; its idle timer; whether it has waited idle for an operation.
        self.hops: list[tuple[str, Shared]] = []
        self.idle_close_s = 0.0
        self.idle_task: asyncio.Task[None] | None = None
        self.pooled = False

    def reusable(self) -> bool:
        return self.usable and not self.conn.is_closed()


class HostConnection:
    """One operation's use of an open, host-key-verified SSH connection to one inventory host."""

    def __init__(self, host: Host, shared: Shared,
                 reopen: Callable[[], Awaitable[Shared]] | None = None) -> None:
        self.host = host
        self._shared = shared
        self._conn = shared.conn
        self.exec_round_trips = 0  # this operation's own, even on a shared connection
        self.taken = [shared]  # every connection this operation holds (the pool lets each go at its end)
        # An idempotent read on a connection that waited idle in the pool: if that one turns out dead,
        # the command is sent again, once, over a connection opened anew (``reopen``).
        self._pooled_conn = shared.conn if reopen is not None else None
        self._reopen = reopen
        self._reopened: asyncio.Future[Shared] | None = None

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
        script = batch_script(nonce, commands, stop_on_failure, cleanup)
        shown_each = [shell_text(step) for step in commands]
        output, exit_status = await self._exec("sh -s", script.encode(), shown="; ".join(shown_each))
        try:
            results = split_batch(nonce, shown_each, output)
        except MissingOutput as exc:
            raise batch_unreadable(self.host, exc) from None
        if stop_on_failure and results and results[-1].exit_status != 0:
            return results
        if len(results) < len(commands):
            raise batch_cut_short(self.host, exit_status, shown_each[len(results)])
        return results

    async def open_tcp(self, dest_host: str, dest_port: int) -> TcpChannel:
        """A direct-tcpip channel to dest_host:dest_port as seen FROM the host.

        Nothing listens on the bot's machine: the stream exists only inside this SSH
        connection, so no local user can ride it to the host's loopback.
        """
        used = self._conn
        try:
            return await self._open_tcp_once(dest_host, dest_port)
        except ConnectionLost as exc:
            await self._again(used, exc)
        return await self._open_tcp_once(dest_host, dest_port)

    async def _open_tcp_once(self, dest_host: str, dest_port: int) -> TcpChannel:
        shared = self._shared
        try:
            reader, writer = await shared.conn.open_connection(dest_host, dest_port, encoding=None)
        except SSH_FAILURES as exc:
            raise self.failed(exc, Step.CHANNEL, shared) from exc
        return TcpChannel(self, reader, writer)

    async def _exec(self, command: str, stdin: bytes | None, timeout_s: float | None = None, *,
                    shown: str | None = None) -> tuple[bytes, int]:
        """Run command; ``shown`` is what errors name (a batch's commands, not ``sh -s``).

        The output is read as it comes, at most ``MAX_OUTPUT_BYTES``: a host that prints
        without end cannot exhaust the bot's memory; past the cap the channel is closed and
        the command is an error saying so.
        """
        shown = shown or command
        timeout = timeout_s if timeout_s is not None else self.host.ssh.command_timeout_s
        used = self._conn
        try:
            return await self._exec_once(command, stdin, timeout, shown)
        except ConnectionLost as exc:
            await self._again(used, exc)
        return await self._exec_once(command, stdin, timeout, shown)

    async def _exec_once(self, command: str, stdin: bytes | None, limit_s: float, shown: str) -> tuple[bytes, int]:
        self.exec_round_trips += 1
        shared = self._shared
        async with shared.sessions:  # never more sessions than sshd's MaxSessions allows
            return await self._exec_in_session(shared, command, stdin, limit_s, shown)

    async def _again(self, used: asyncssh.SSHClientConnection, error: ConnectionLost) -> None:
        """Return to send again over a new connection, or raise error: only an idempotent read whose pooled
        connection (``used``) is closed now goes on, once; what it ran on the dead one is dropped."""
        if used is not self._pooled_conn or not used.is_closed():
            raise error
        if self._reopened is None:
            assert self._reopen is not None
            self._reopened = asyncio.ensure_future(self._reopen())
        shared = await asyncio.shield(self._reopened)  # the batch and the HTTP channels share one reopening
        if shared not in self.taken:
            self.taken.append(shared)
            self._shared, self._conn = shared, shared.conn

    async def _exec_in_session(self, shared: Shared, command: str, stdin: bytes | None, limit_s: float,
                               shown: str) -> tuple[bytes, int]:
        timeout = limit_s
        process: asyncssh.SSHClientProcess[bytes] | None = None
        refused: list[asyncssh.ChannelOpenError] = []
        try:
            async with asyncio.timeout(timeout):
                process = await self._open_session(shared, command, refused)
                if stdin:
                    process.stdin.write(stdin)
                process.stdin.write_eof()
                output = await _read_capped(process.stdout, MAX_OUTPUT_BYTES)
                if output is None:
                    raise output_over_cap(self.host, shown, MAX_OUTPUT_BYTES // MIB)
                completed = await process.wait()
        except TimeoutError as exc:
            # the deadline, not the link: a session still being refused (no process yet) says so
            raise as_error(exc, At(self.host, Step.SESSION, shown=shown, timeout_s=timeout,
                                   refused=refused if process is None else ())) from None
        except SSH_FAILURES as exc:
            raise self.failed(exc, Step.SESSION, shared) from exc
        finally:
            if process is not None and process.exit_status is None:
                process.close()
        if completed.exit_status is None:
            raise self._lost(no_exit_status(self.host, shown), shared)
        return output, int(completed.exit_status)

    async def _open_session(self, shared: Shared, command: str, refused: list[asyncssh.ChannelOpenError]
                            ) -> asyncssh.SSHClientProcess[bytes]:
        """An exec session; one refused for want of a slot is tried again with backoff until the caller's deadline."""
        delay = RETRY_FIRST_S
        while True:
            try:
                return await shared.conn.create_process(command, encoding=None, stderr=asyncssh.STDOUT)
            except asyncssh.ChannelOpenError as exc:
                if exc.code not in SESSION_RETRY_CODES or shared.conn.is_closed():
                    raise
                refused.append(exc)
                shared.refused_sessions += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    def failed(self, exc: BaseException, step: Step, shared: Shared | None = None) -> ProofbotError:
        """The error for exc (``as_error``), raised by a session or channel of shared (default: the current)."""
        shared = shared or self._shared
        return self._lost(as_error(exc, At(self.host, step, closed=shared.conn.is_closed())), shared)

    def _lost(self, error: ProofbotError, shared: Shared) -> ProofbotError:
        """Pass error on; a connection that dropped is never handed to another operation."""
        if isinstance(error, ConnectionLost):
            shared.usable = False
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
        except SSH_FAILURES as exc:
            raise self._owner.failed(exc, Step.CHANNEL) from exc

    async def write(self, data: bytes) -> None:
        try:
            self._writer.write(data)
            await self._writer.drain()
        except SSH_FAILURES as exc:
            raise self._owner.failed(exc, Step.CHANNEL) from exc

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

