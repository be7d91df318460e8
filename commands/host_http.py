"""HTTP as the host sees it (health, probe): one request over an SSH direct-tcpip channel, bounded as a whole.

No port listens on the bot's machine. httpx sends through ``_ChannelTransport`` (httpx's
one-method transport seam), which hands the request to httpcore's connection pool with a
network backend whose ``connect_tcp`` opens a direct-tcpip channel on the host's SSH
connection; httpcore (h11) speaks HTTP/1.1 over it, and an https URL gets TLS over the
channel through anyio's ``TLSStream`` (httpcore's ``start_tls`` seam), verified against
certifi's CAs as before.

Bounds against a hostile or broken endpoint: the whole request (channel, TLS, headers,
body) runs under one deadline, since httpx's own timeouts bound each read and
an endpoint sending one byte every 2 s never trips them (``commands.awake``: a deadline the
event loop ran late, proofbot starved of CPU, first reads what already arrived); the body is read as a stream, at
most ``BODY_CAP_BYTES``, with ``Accept-Encoding: identity`` so no compressed body can
expand past that. A request that did not complete is never a status: ``HttpOutcome.status``
is None and ``problem`` says plainly what happened ("slow drip", the cap).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import sys
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpcore

# httpx's __init__ imports its command-line client (httpx._main) whenever click and rich are installed (they are,
# for other packages): ~50 ms of CPU a cold verify never uses (click, rich, pygments). A None in sys.modules makes
# that import fail and httpx keeps its stub ``main``; nothing in proofbot runs httpx's CLI.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
import httpx
from anyio.streams.tls import TLSStream

from commands.awake import awake_timeout
from commands.checks.health import BODY_CAP_BYTES, HEALTH_TIMEOUT_S, HttpOutcome
from commands.checks.probe import ProbeCheck
from commands.errors import CouldNotCheck
from commands.findings import Finding
from commands.inventory import Probe
from commands.ssh import HostConnection, TcpChannel

READ_CHUNK = 65536


async def fetch_via_host(conn: HostConnection, url: str, *, method: str = "GET",
                         json_body: object | None = None, timeout_s: float = HEALTH_TIMEOUT_S,
                         headers: dict[str, str] | None = None,
                         ssl_context: ssl.SSLContext | None = None) -> HttpOutcome:
    """Send one request to url as seen FROM the host, over the SSH connection; done within timeout_s.

    ``headers`` are sent but never shown: the request string names only their keys.
    ``ssl_context`` replaces the default verification (certifi's CAs) for https.
    """
    parts = urlsplit(url)
    dest = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    # Userinfo is neither sent nor put in a Host header: only host[:port] goes out.
    bare = f"[{dest}]" if ":" in dest else dest
    target = parts._replace(netloc=f"{bare}:{parts.port}" if parts.port else bare).geturl()
    request = f"{method} {url} (from {conn.host.name}, over an SSH channel)"
    if headers:
        request += " with header(s) " + ", ".join(sorted(headers))
    sent = {**(headers or {}), "Accept-Encoding": "identity"}
    # Loading the CA bundle costs tens of ms of CPU: only an https URL needs it.
    tls = ssl_context or (_default_ssl_context() if parts.scheme == "https" else None)
    transport = _ChannelTransport(conn, tls)
    started = time.monotonic()
    status: int | None = None
    body = bytearray()
    try:
        async with awake_timeout(timeout_s), \
                httpx.AsyncClient(transport=transport, timeout=None, trust_env=False) as client, \
                client.stream(method, target, headers=sent, json=json_body) as response:
            status = response.status_code
            async for chunk in response.aiter_raw(READ_CHUNK):
                body += chunk
                if len(body) > BODY_CAP_BYTES:
                    problem = (f"HTTP {status}, then the body passed {BODY_CAP_BYTES // 1024} KiB: "
                               "not read further, not judged")
                    return HttpOutcome(request, None, "", time.monotonic() - started, problem)
    except TimeoutError:
        received = transport.backend.received
        if not received:
            problem = f"no answer within {timeout_s:g} s"
        else:
            head = f"HTTP {status} came, then " if status is not None else ""
            problem = f"{head}the endpoint sent {received} bytes in {timeout_s:g} s and never finished: slow drip"
        return HttpOutcome(request, None, "", time.monotonic() - started, problem)
    except httpx.HTTPError as exc:
        problem = f"no HTTP response ({type(exc).__name__}): the host could not reach {dest}:{port}"
        detail = str(exc).strip()
        return HttpOutcome(request, None, "", time.monotonic() - started,
                           f"{problem}: {detail[:300]}" if detail else problem)
    text = bytes(body).decode(response.encoding or "utf-8", "replace")
    return HttpOutcome(request, status, text, time.monotonic() - started)


async def run_probe(conn: HostConnection, probe: Probe) -> Finding:
    """Send the probe once and judge the answer (the probe check, as the runner sends it)."""
    from commands.verify.runner import ask  # the runner sends every HTTP check through this module

    return await ask(conn, ProbeCheck(probe))


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """What httpx verified https with before (certifi's CAs, no environment), built once."""
    return httpx.create_ssl_context(trust_env=False)


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


class _Stream(httpcore.AsyncNetworkStream):
    """What httpcore reads and writes: the channel, or TLS over it; counts the bytes that arrive."""

    def __init__(self, stream: anyio.abc.ByteStream, backend: _ChannelBackend) -> None:
        self._stream = stream
        self._backend = backend

    # httpcore's interface passes per-operation timeouts; the whole request is bounded by the caller instead.
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        try:
            data = await self._stream.receive(max_bytes)
        except anyio.EndOfStream:
            return b""
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError) as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc
        self._backend.received += len(data)
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        try:
            await self._stream.send(buffer)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError) as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:  # noqa: ASYNC109
        try:
            wrapped = await TLSStream.wrap(self._stream, ssl_context=ssl_context, hostname=server_hostname,
                                           standard_compatible=False, server_side=False)
        except (anyio.BrokenResourceError, anyio.EndOfStream, ssl.SSLError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(f"TLS over the SSH channel failed: {exc}") from exc
        return _Stream(wrapped, self._backend)

    def get_extra_info(self, info: str) -> Any:
        return None  # no socket here; httpcore then speaks HTTP/1.1, the only protocol offered


class _ChannelBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network: every "TCP connection" is a direct-tcpip channel of one SSH connection."""

    def __init__(self, conn: HostConnection) -> None:
        self._conn = conn
        self.received = 0

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        try:
            channel = await self._conn.open_tcp(host, port)
        except CouldNotCheck as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _Stream(_ChannelBytes(channel), self)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reached over SSH")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


_MAPPED: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
)


@contextmanager
def _httpx_errors() -> Iterator[None]:
    """httpcore's exceptions as httpx's, as a transport must raise them."""
    try:
        yield
    except Exception as exc:
        for core, mapped in _MAPPED:
            if isinstance(exc, core):
                raise mapped(str(exc) or type(exc).__name__) from exc
        raise


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class _ChannelTransport(httpx.AsyncBaseTransport):
    """httpx -> httpcore's pool over ``_ChannelBackend``: one request, one channel, closed after."""

    def __init__(self, conn: HostConnection, ssl_context: ssl.SSLContext | None) -> None:
        self.backend = _ChannelBackend(conn)
        self._pool = httpcore.AsyncConnectionPool(ssl_context=ssl_context, network_backend=self.backend,
                                                  max_connections=1, max_keepalive_connections=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host,
                             port=request.url.port, target=request.url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        with _httpx_errors():
            response = await self._pool.handle_async_request(core)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(status_code=response.status, headers=response.headers, stream=_Body(response.stream),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()
