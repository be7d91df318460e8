"""HTTP as the host sees it (health, probe): one request over an SSH direct-tcpip channel, bounded as a whole.

No port listens on the bot's machine. The request is HTTP/1.1 spoken by h11 (``commands.http_wire``) straight
over a direct-tcpip channel of the host's SSH connection, one request per channel, ``Connection: close``; an
https URL gets TLS over the channel first (``commands.host_tls``, loaded only then), verified against certifi's
CAs. No HTTP client library's pool, cookies or auth: a cold plain-http verify loads none of httpx, httpcore, anyio.

Bounds against a hostile or broken endpoint (``commands.http_wire.exchange``): the whole request (channel, TLS,
headers, body) runs under one deadline, since an endpoint sending one byte every 2 s never trips a per-read
timeout (``commands.awake``: a deadline the event loop ran late, proofbot starved of CPU, first reads what already
arrived); the headers are capped by h11, the body at ``BODY_CAP_BYTES``, with ``Accept-Encoding: identity`` so no
compressed body can expand past that. A request that did not complete is never a status: ``HttpOutcome.status``
is None and ``problem`` says plainly what happened ("slow drip", the cap).
"""

from __future__ import annotations

import functools
import json
import ssl
import time
from urllib.parse import quote, urlsplit

from commands.checks.health import BODY_CAP_BYTES, HEALTH_TIMEOUT_S, HttpOutcome
from commands.checks.probe import ProbeCheck
from commands.errors import CouldNotCheck
from commands.findings import Finding
from commands.http_wire import ByteStream, WireError, WireRequest, exchange
from commands.inventory import Probe
from commands.ssh import HostConnection, TcpChannel

# What a request-target keeps as is (RFC 3986 pchar and "/", "?" in a query, and "%" of what is already encoded);
# anything else (a space, non-ASCII) is percent-encoded, as httpx did.
_PATH_SAFE = "/%!$&'()*+,;=:@-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
USER_AGENT = "proofbot"


async def fetch_via_host(conn: HostConnection, url: str, *, method: str = "GET",
                         json_body: object | None = None, timeout_s: float = HEALTH_TIMEOUT_S,
                         headers: dict[str, str] | None = None,
                         ssl_context: ssl.SSLContext | None = None) -> HttpOutcome:
    """Send one request to url as seen FROM the host, over the SSH connection; done within timeout_s.

    ``headers`` are sent but never shown: the request string names only their keys.
    ``ssl_context`` replaces the default verification (certifi's CAs) for https.
    """
    parts = urlsplit(url)
    https = parts.scheme == "https"
    dest = _ascii_host(parts.hostname or "127.0.0.1")
    port = parts.port or (443 if https else 80)
    request = f"{method} {url} (from {conn.host.name}, over an SSH channel)"
    if headers:
        request += " with header(s) " + ", ".join(sorted(headers))
    body = None if json_body is None else json.dumps(json_body, ensure_ascii=False, separators=(",", ":"),
                                                     allow_nan=False).encode()
    target = quote(parts.path or "/", safe=_PATH_SAFE) + (f"?{quote(parts.query, safe=_QUERY_SAFE)}"
                                                          if parts.query else "")
    wire = WireRequest(method, target, _headers(dest, parts.port, https, headers or {}, body), body, f"{dest}:{port}")
    # Loading the CA bundle costs tens of ms of CPU: only an https URL needs it.
    tls = ssl_context or (_default_ssl_context() if https else None)
    channels: list[TcpChannel] = []

    async def open_stream() -> ByteStream:
        try:
            channel = await conn.open_tcp(dest, port)
        except CouldNotCheck as exc:
            raise WireError("ConnectError", str(exc)) from exc
        channels.append(channel)
        if tls is None:
            return _Plain(channel)
        from commands.host_tls import wrap  # anyio's TLS: only an https URL loads it

        return await wrap(channel, tls, dest)

    started = time.monotonic()
    try:
        answer = await exchange(open_stream, wire, timeout_s=timeout_s, body_cap=BODY_CAP_BYTES)
    finally:
        for channel in channels:
            channel.close()  # also when cancelled between the channel opening and the stream using it
    return HttpOutcome(request, answer.status, answer.body, time.monotonic() - started, answer.problem)


async def run_probe(conn: HostConnection, probe: Probe) -> Finding:
    """Send the probe once and judge the answer (the probe check, as the runner sends it)."""
    from commands.verify.runner import ask  # the runner sends every HTTP check through this module

    return await ask(conn, ProbeCheck(probe))


def _headers(dest: str, port: int | None, https: bool, given: dict[str, str],
             body: bytes | None) -> list[tuple[str, str]]:
    """The headers httpx sent, with the caller's winning over the defaults (case-insensitively), except that the
    body is never compressed and the connection is closed after the one request."""
    # Userinfo is neither sent nor put in a Host header: only host[:port] goes out, the port only when not default.
    host = f"[{dest}]" if ":" in dest else dest
    if port is not None and port != (443 if https else 80):
        host += f":{port}"
    defaults = [("Host", host), ("Accept", "*/*"), ("Connection", "close"), ("User-Agent", USER_AGENT)]
    if body is not None:
        defaults += [("Content-Length", str(len(body))), ("Content-Type", "application/json")]
    forced = {"accept-encoding": "identity"}
    given_names = {name.lower() for name in given} | forced.keys()
    return [*((name, value) for name, value in defaults if name.lower() not in given_names),
            *((name, value) for name, value in given.items() if name.lower() not in forced),
            ("Accept-Encoding", "identity")]


def _ascii_host(host: str) -> str:
    """The host as it goes on the wire: an internationalized name in its IDNA (xn--) form."""
    try:
        return host if host.isascii() else host.encode("idna").decode("ascii")
    except UnicodeError:
        return host  # h11 then refuses it as a header value: "no HTTP response (LocalProtocolError)"


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """What httpx verified https with before (certifi's CAs, no environment), built once."""
    import certifi

    context = ssl.create_default_context(cafile=certifi.where())
    context.set_alpn_protocols(["http/1.1"])
    return context


class _Plain:
    """A direct-tcpip channel as the wire's byte stream; a channel that fails is a ``WireError``, as httpx's were."""

    def __init__(self, channel: TcpChannel) -> None:
        self._channel = channel

    async def receive(self, max_bytes: int) -> bytes:
        try:
            return await self._channel.read(max_bytes)
        except CouldNotCheck as exc:
            raise WireError("ReadError", str(exc)) from exc

    async def send(self, data: bytes) -> None:
        try:
            await self._channel.write(data)
        except CouldNotCheck as exc:
            raise WireError("WriteError", str(exc)) from exc

    async def aclose(self) -> None:
        self._channel.close()
