"""The SSH boundary: one verified connection per host, shared and bounded; commands batched into few round trips.

Every asyncssh, socket and timeout exception becomes an error of ``commands.errors`` in one function,
``failures.as_error``. A command that comes back without an exit status (the link dropped) is an error,
never a result.

ahead (``connect``, ``connect_ahead``) · pool (shared connections, bastions that linger, warm idle ones in
``serve``) · opening (one handshake, bounded) · options (what asyncssh is given; ``proofbot ping -v``) ·
channels (sessions, batches, direct-tcpip) · batch (the framing) · failures (exceptions mapped,
and what came back incomplete).
This module is the package's API.
"""

from commands.ssh.ahead import connect, connect_ahead
from commands.ssh.batch import BatchStep, ShellStep
from commands.ssh.channels import MAX_OUTPUT_BYTES, HostConnection, TcpChannel
from commands.ssh.pool import bastions_kept, idle_connections, open_connections, warm_connections

__all__ = ["MAX_OUTPUT_BYTES", "BatchStep", "HostConnection", "ShellStep", "TcpChannel", "bastions_kept", "connect",
           "connect_ahead", "idle_connections", "open_connections", "warm_connections"]
