"""TLS over an SSH direct-tcpip channel, for an https health_url or probe (anyio's TLSStream): loaded only when
one is fetched, so a plain-http verify never imports anyio."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import anyio
import anyio.abc
from anyio.streams.tls import TLSStream

from commands.errors import CouldNotCheck
from commands.http_wire import READ_CHUNK, WireError
from commands.ssh import TcpChannel

_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError)


async def wrap(channel: TcpChannel, ssl_context: ssl.SSLContext, hostname: str) -> _TlsBytes:
    """The TLS handshake over channel, the certificate verified by ssl_context for hostname; ``WireError`` else."""
    try:
        tls = await TLSStream.wrap(_ChannelBytes(channel), ssl_context=ssl_context, hostname=hostname,
                                   standard_compatible=False, server_side=False)
    except (anyio.EndOfStream, *_BROKEN) as exc:
        raise WireError("ConnectError", f"TLS over the SSH channel failed: {exc}") from exc
    return _TlsBytes(tls)


class _TlsBytes:
    """TLS over the channel as the wire's byte stream: b"" at the end, ``WireError`` when it broke."""

    def __init__(self, tls: TLSStream) -> None:
        self._tls = tls

    async def receive(self, max_bytes: int) -> bytes:
        with _failing_as("ReadError"), suppress(anyio.EndOfStream):
            return await self._tls.receive(max_bytes)
        return b""

    async def send(self, data: bytes) -> None:
        with _failing_as("WriteError"):
            await self._tls.send(data)

    async def aclose(self) -> None:
        await self._tls.aclose()  # standard_compatible=False: no close_notify to wait for


@contextmanager
def _failing_as(kind: str) -> Iterator[None]:
    try:
        yield
    except _BROKEN as exc:
        raise WireError(kind, str(exc) or type(exc).__name__) from exc


class _ChannelBytes(anyio.abc.ByteStream):
    """A direct-tcpip channel as an anyio byte stream, so anyio's TLSStream can wrap it."""

    def __init__(self, channel: TcpChannel) -> None:
        self._channel = channel

    async def receive(self, max_bytes: int = READ_CHUNK) -> bytes:
        try:
            data = await self._channel.read(max_bytes)
        except CouldNotCheck as exc:
            raise anyio.BrokenResourceError(str(exc)) from exc
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        try:
            await self._channel.write(item)
        except CouldNotCheck as exc:
            raise anyio.BrokenResourceError(str(exc)) from exc

    async def send_eof(self) -> None:
        self._channel.write_eof()

    async def aclose(self) -> None:
        self._channel.close()
