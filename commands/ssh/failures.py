"""Every error the SSH boundary raises, worded here: ``as_error`` is the one place where an asyncssh, socket
or timeout exception becomes a ``commands.errors`` error; the rest say what came back incomplete."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

import asyncssh

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

if TYPE_CHECKING:
    from commands.inventory import Hop, Host
    from commands.known_hosts import Decision

# What as_error maps: anything else is not an SSH failure and passes through the boundary unchanged.
SSH_FAILURES = (OSError, asyncssh.Error, TimeoutError, ValueError)


class HostKeyRefused(asyncssh.HostKeyNotVerifiable):
    """proofbot's decision refused the presented host key (raised inside the handshake); ``decision`` says why."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.reason)
        self.decision = decision


class Step(StrEnum):
    """What was being done when the exception came."""

    CONNECT = "connect"  # TCP, handshake, host key, login (through a bastion's tunnel or not)
    SESSION = "session"  # an exec session: opening it, its output, its exit status
    CHANNEL = "channel"  # a direct-tcpip channel (HTTP as the host sees it)
    AGENT = "agent"  # the ssh-agent at SSH_AUTH_SOCK
    CERTIFICATE = "certificate"  # reading a user certificate


class At(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    """Where an SSH failure happened: the host or hop, the step, and what the message names."""

    target: Host | Hop
    step: Step
    via: Hop | None = None  # CONNECT through a bastion: the hop asked to open the tunnel
    shown: str = ""  # SESSION: the command; AGENT, CERTIFICATE: the socket or file
    timeout_s: float = 0  # the deadline that passed (a TimeoutError)
    refused: Sequence[asyncssh.ChannelOpenError] = ()  # SESSION: sessions sshd refused before the deadline
    closed: bool = False  # the connection is closed now: whatever asyncssh says, the link is what failed


def as_error(exc: BaseException, at: At) -> ProofbotError:
    """The one mapping of an exception raised at the SSH boundary into ``commands.errors``."""
    host = at.target
    where = f"{host.name} ({host.address}:{host.port})"
    against = ", ".join(host.ssh.known_hosts_list())
    error: ProofbotError
    if at.step is Step.AGENT:
        error = AuthenticationFailed(f"{host.name}: cannot use the ssh agent at SSH_AUTH_SOCK={at.shown}: {exc}")
    elif at.step is Step.CERTIFICATE:
        error = AuthenticationFailed(f"{host.name}: cannot read user certificate {at.shown}: {exc}")
    elif isinstance(exc, HostKeyRefused):
        # proofbot's own decision (commands.known_hosts): the reason names the file:line and what was wrong
        error = HostKeyNotVerified(f"{where}: host key not verified against {against}: {exc.decision.reason}",
                                   hint=exc.decision.hint)
    elif isinstance(exc, asyncssh.HostKeyNotVerifiable):
        # asyncssh's check after proofbot accepted: never expected (its sets are a superset of the decision's)
        error = HostKeyNotVerified(f"{where}: host key not verified against {against}: {exc.reason}",
                                   hint="nothing was trusted; verify the host's key out of band")
    elif isinstance(exc, asyncssh.PermissionDenied):
        error = AuthenticationFailed(f"{where}: user {host.ssh.user} was refused: {exc.reason}",
                                     hint="check ssh.client_keys and the host's authorized_keys")
    elif isinstance(exc, asyncssh.ChannelOpenError) and at.step is Step.CONNECT and at.via is not None:
        error = HostUnreachable(f"{where}: the bastion {at.via.name} could not connect to it: {exc.reason}",
                                hint="check the address as the bastion sees it, and that sshd runs")
    elif isinstance(exc, asyncssh.ChannelOpenError):
        error = HostUnreachable(f"{where}: the host refused a channel: {exc.reason}")
    elif isinstance(exc, asyncssh.DisconnectError | asyncssh.ConnectionLost):
        error = ConnectionLost(f"{where}: connection lost: {exc.reason}")
    elif isinstance(exc, TimeoutError) and at.step is Step.CONNECT:  # elsewhere a socket's own timeout: below
        error = HostUnreachable(f"{where}: no SSH answer within {at.timeout_s:g} s",
                                hint="check the address, the network path and that sshd runs")
    elif isinstance(exc, TimeoutError) and at.step is Step.SESSION and at.refused:
        error = HostUnreachable(
            f"{where}: sshd refused a session channel {len(at.refused)} times in {at.timeout_s:g} s: "
            f"{at.refused[-1].reason}",
            hint="its MaxSessions may be lower than ssh.max_sessions: lower ssh.max_sessions for this host")
    elif isinstance(exc, TimeoutError) and at.step is Step.SESSION:
        error = CommandTimedOut(f"{host.name}: command did not finish within {at.timeout_s:g} s: {at.shown[:200]}",
                                hint="raise ssh.command_timeout_s in the inventory if this is expected")
    elif isinstance(exc, ValueError) and at.step is Step.CONNECT:  # asyncssh refusing a key file or option
        error = HostKeyNotVerified(f"{where}: cannot use SSH settings: {exc}")
    elif isinstance(exc, OSError):
        error = HostUnreachable(f"{where}: cannot connect: {exc.strerror or str(exc) or type(exc).__name__}",
                                hint="check the address, the network path and that sshd runs")
    else:
        error = ConnectionLost(f"{where}: SSH error: {exc}")
    if at.closed and not isinstance(error, ConnectionLost):
        # asyncssh says "channel refused" on a closed connection: the link is what failed.
        error = ConnectionLost(f"{where}: connection lost ({error.message.removeprefix(where + ': ')})")
    return error


def through_bastion(error: ProofbotError, hops: tuple[Hop, ...]) -> BastionUnreachable:
    """A failure to reach hops[-1] (already an error of this tree), said once for every host behind it."""
    hop = hops[-1]
    where = f"{hop.name} ({hop.address}:{hop.port})"
    through = f" through {', '.join(h.name for h in hops[:-1])}" if len(hops) > 1 else ""
    return BastionUnreachable(
        f"could not reach the bastion {where}{through}: "
        f"{error.message.removeprefix(where + ': ').removeprefix(hop.name + ': ')}",
        hint=(error.hint + "; " if error.hint else "") + "no host behind it was checked")


def batch_unreadable(host: Host, error: MissingOutput) -> MissingOutput:
    """A batch's markers malformed (``split_batch`` says how), said for host."""
    return MissingOutput(f"{host.name}: {error.message}", hint=error.hint)


def no_exit_status(host: Host, shown: str) -> ConnectionLost:
    """The session ended without an exit status: the link dropped (asyncssh returns None, raises nothing)."""
    return ConnectionLost(f"{host.name}: connection lost, no exit status for: {shown[:200]}",
                          hint="nothing is known about that command's effect; check the host and retry")


def output_over_cap(host: Host, shown: str, cap_mib: int) -> CouldNotCheck:
    return CouldNotCheck(f"{host.name}: output passed {cap_mib} MiB, stopped reading: {shown[:200]}",
                         hint="nothing was judged from it; a command proofbot runs prints far less")


def batch_cut_short(host: Host, exit_status: int, lost: str) -> ConnectionLost:
    """A batch whose shell ended before a step's end marker: that step and the ones after have no result."""
    return ConnectionLost(f"{host.name}: batch ended (exit {exit_status}) before `{lost}` reported",
                          hint="the host may have killed the session; run verify again")
