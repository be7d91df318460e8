"""The SSH boundary: one verified connection per host, commands batched into few round trips.

Every asyncssh and socket failure is mapped here, once, into ``commands.errors``. A
command that comes back without an exit status (the link dropped) is an error, never a
result.
"""

from __future__ import annotations

import asyncio
import secrets
import shlex
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncssh

from commands.command_result import CommandResult
from commands.errors import (
    AuthenticationFailed,
    CommandTimedOut,
    ConnectionLost,
    HostKeyNotVerified,
    HostUnreachable,
    ProofbotError,
)
from commands.inventory import Host

KEEPALIVE_INTERVAL_S = 2
KEEPALIVE_COUNT_MAX = 3


class HostConnection:
    """An open, host-key-verified SSH connection to one inventory host."""

    def __init__(self, host: Host, conn: asyncssh.SSHClientConnection) -> None:
        self.host = host
        self._conn = conn
        self.exec_round_trips = 0

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

    async def run_batch(self, commands: Sequence[Sequence[str]], *, stop_on_failure: bool = False,
                        cleanup: Sequence[str] = ()) -> list[CommandResult]:
        """Run several commands in ONE exec round trip, each result kept apart.

        Each command's output is framed by markers carrying a per-call random nonce, so
        nothing a command prints can forge another command's result or exit status. The
        script (and so the nonce) goes to ``sh -s`` on stdin, never in an argv that any user
        on the host can read in /proc while the batch runs; each command's stdin is /dev/null. With
        stop_on_failure the batch ends at the first non-zero exit (the results then stop
        there); ``cleanup`` paths are removed by the remote shell however it exits,
        including when the link drops and sshd hangs up on it.
        """
        if not commands:
            return []
        nonce = secrets.token_hex(8)
        script = _batch_script(nonce, [shlex.join(argv) for argv in commands], stop_on_failure, cleanup)
        shown = "; ".join(shlex.join(argv) for argv in commands)
        output, exit_status = await self._exec("sh -s", script.encode(), shown=shown)
        results = _split_batch(nonce, [shlex.join(argv) for argv in commands], output)
        if stop_on_failure and results and results[-1].exit_status != 0:
            return results
        if len(results) < len(commands):
            lost = shlex.join(commands[len(results)])
            raise ConnectionLost(
                f"{self.host.name}: batch ended (exit {exit_status}) before `{lost}` reported",
                hint="the host may have killed the session; run verify again",
            )
        return results

    @asynccontextmanager
    async def forward(self, dest_host: str, dest_port: int) -> AsyncIterator[int]:
        """Forward a loopback port here to dest_host:dest_port as seen FROM the host."""
        try:
            listener = await self._conn.forward_local_port("127.0.0.1", 0, dest_host, dest_port)
        except (OSError, asyncssh.Error) as exc:
            raise _map_error(self.host, exc) from exc
        try:
            yield int(listener.get_port())
        finally:
            listener.close()
            await listener.wait_closed()

    async def _exec(self, command: str, stdin: bytes | None, timeout_s: float | None = None, *,
                    shown: str | None = None) -> tuple[bytes, int]:
        """Run command; ``shown`` is what errors name (a batch's commands, not ``sh -s``)."""
        self.exec_round_trips += 1
        shown = shown or command
        timeout = timeout_s if timeout_s is not None else self.host.ssh.command_timeout_s
        try:
            completed = await self._conn.run(
                command, input=stdin, encoding=None, stderr=asyncssh.STDOUT, timeout=timeout
            )
        except asyncssh.TimeoutError:
            raise CommandTimedOut(
                f"{self.host.name}: command did not finish within {timeout:g} s: {shown[:200]}",
                hint="raise ssh.command_timeout_s in the inventory if this is expected",
            ) from None
        except (OSError, asyncssh.Error) as exc:
            raise _map_error(self.host, exc) from exc
        if completed.exit_status is None:
            raise ConnectionLost(
                f"{self.host.name}: connection lost, no exit status for: {shown[:200]}",
                hint="nothing is known about that command's effect; check the host and retry",
            )
        output = completed.stdout if isinstance(completed.stdout, bytes) else b""
        return output, int(completed.exit_status)


@asynccontextmanager
async def connect(host: Host) -> AsyncIterator[HostConnection]:
    """Open one SSH connection to host with its key checked against known_hosts."""
    settings = host.ssh
    known_hosts = settings.known_hosts_path()
    if not known_hosts.is_file():
        raise HostKeyNotVerified(
            f"{host.name}: known_hosts file {known_hosts} does not exist",
            hint="create it with the host's verified key (ssh-keyscan, checked out of band)",
        )
    options: dict[str, Any] = {
        "username": settings.user,
        "known_hosts": str(known_hosts),
        "client_keys": [str(path) for path in settings.client_key_paths()],
        "connect_timeout": settings.connect_timeout_s,
        "keepalive_interval": KEEPALIVE_INTERVAL_S,
        "keepalive_count_max": KEEPALIVE_COUNT_MAX,
        "config": None,
        "agent_path": None,
        "password": None,
        "kbdint_auth": False,
    }
    try:
        conn = await asyncio.wait_for(
            asyncssh.connect(host.address, host.port, **options),
            timeout=settings.connect_timeout_s + 1,
        )
    except TimeoutError:
        raise HostUnreachable(
            f"{host.name} ({host.address}:{host.port}): no SSH answer within "
            f"{settings.connect_timeout_s:g} s",
            hint="check the address, the network path and that sshd runs",
        ) from None
    except (OSError, asyncssh.Error, ValueError) as exc:
        raise _map_error(host, exc) from exc
    try:
        yield HostConnection(host, conn)
    finally:
        conn.close()
        try:
            await asyncio.wait_for(conn.wait_closed(), timeout=2)
        except (TimeoutError, OSError, asyncssh.Error):
            pass


def _map_error(host: Host, exc: BaseException) -> ProofbotError:
    where = f"{host.name} ({host.address}:{host.port})"
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return HostKeyNotVerified(
            f"{where}: host key not verified against {host.ssh.known_hosts_path()}: {exc.reason}",
            hint="the key is unknown or changed; verify it out of band before trusting it",
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


def _batch_script(nonce: str, commands: list[str], stop_on_failure: bool = False,
                  cleanup: Sequence[str] = ()) -> str:
    lines = []
    if cleanup:
        removal = shlex.quote(shlex.join(["rm", "-f", "--", *cleanup]))
        lines.append(f"trap {removal} EXIT")
        lines.append("trap 'exit 129' HUP INT TERM PIPE")
    lines.append(f"printf '{nonce} start %s\\n' \"$(date +%s.%N)\"")
    for index, command in enumerate(commands):
        lines.append(f"( {command} ) </dev/null 2>&1")
        lines.append("rc=$?")
        lines.append(f"printf '\\n{nonce} end {index} %s %s\\n' \"$rc\" \"$(date +%s.%N)\"")
        if stop_on_failure:
            lines.append('[ "$rc" -eq 0 ] || exit "$rc"')
    return "\n".join(lines)


def _split_batch(nonce: str, commands: list[str], output: bytes) -> list[CommandResult]:
    """Cut a batch's output back into one result per command, in order."""
    marker = nonce.encode()
    start_tag = marker + b" start "
    if not output.startswith(start_tag):
        return []
    first_line_end = output.index(b"\n") if b"\n" in output else len(output)
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
        if len(fields) != 2:
            break
        exit_status, finished = int(fields[0]), _as_float(fields[1])
        duration = max(0.0, finished - previous_time) if finished and previous_time else 0.0
        results.append(CommandResult(command, exit_status, body, duration))
        previous_time = finished
        rest = rest[line_end + 1 :]
    return results


def _as_float(raw: bytes) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        return 0.0
