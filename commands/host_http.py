"""HTTP as the host sees it (health, probe): one request over an SSH direct-tcpip channel, bounded as a whole.

No port listens on the bot's machine. The request is HTTP/1.1 spoken by h11 (``commands.http_wire``) straight
over a direct-tcpip channel of the host's SSH connection; an https URL gets TLS over the channel first
(``commands.host_tls``, loaded only then), verified against certifi's CAs. No HTTP client library's pool, cookies or
auth: a cold plain-http verify loads none of httpx, httpcore, anyio.

Requests asked together to one plain-http host:port (a verify's health and probe) share one channel, in the order
asked (``_Lane``): the next waits for the one ahead (at most ``LANE_WAIT_S``, then it opens its own channel) and
goes over its channel when both ends kept it open (keep-alive). Only while someone waits: a request asked later (a
restart's poll, the verify after it) never meets a connection the service accepted before.

Bounds against a hostile or broken endpoint (``commands.http_wire.exchange``): the whole request (channel, TLS,
headers, body) runs under one deadline, since an endpoint sending one byte every 2 s never trips a per-read
timeout (``commands.awake``: a deadline the event loop ran late, proofbot starved of CPU, first reads what already
arrived); the headers are capped by h11, the body at ``BODY_CAP_BYTES``, with ``Accept-Encoding: identity`` so no
compressed body can expand past that. A request that did not complete is never a status: ``HttpOutcome.status``
is None and ``problem`` says plainly what happened ("slow drip", the cap).
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import time
import weakref
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

import h11

from commands.checks.health import BODY_CAP_BYTES, HEALTH_TIMEOUT_S, HttpOutcome
from commands.checks.probe import ProbeCheck
from commands.errors import CouldNotCheck
from commands.findings import Finding
from commands.http_wire import ByteStream, Kept, WireError, WireRequest, exchange
from commands.inventory import Probe
from commands.ssh import HostConnection, TcpChannel

# What a request-target keeps as is (RFC 3986 pchar and "/", "?" in a query, and "%" of what is already encoded);
# anything else (a space, non-ASCII) is percent-encoded, as httpx did.
_PATH_SAFE = "/%!$&'()*+,;=:@-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
USER_AGENT = "proofbot"
# How long a request waits for the one ahead of it on its host:port before opening its own channel: a health that
# hangs to its deadline never holds the probe back by more than this.
LANE_WAIT_S = 2.0


async def fetch_via_host(conn: HostConnection, url: str, *, method: str = "GET",
                         json_body: object | None = None, timeout_s: float = HEALTH_TIMEOUT_S,
                         headers: Mapping[str, str] | None = None,
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

    lane = None if tls is not None else _lanes.setdefault(conn, {}).setdefault((dest, port), _Lane())
    turn = _Turn(lane) if lane is not None else None
    try:
        kept = await turn.start() if turn is not None else None
        started = time.monotonic()
        answer = await exchange(open_stream, wire, timeout_s=timeout_s, body_cap=BODY_CAP_BYTES, kept=kept,
                                keep=turn.keep if turn is not None else None)
    finally:
        if turn is not None:
            await turn.end()
            lanes = _lanes.get(conn, {})
            if lane is not None and lane.idle() and lanes.get((dest, port)) is lane:
                del lanes[(dest, port)]
        for channel in channels:
            if turn is None or not turn.kept_one:
                channel.close()  # also when cancelled between the channel opening and the stream using it
    return HttpOutcome(request, answer.status, answer.body, time.monotonic() - started, answer.problem)


class _Lane:
    """The requests asked together to one host:port over one host connection: one at a time, in the order asked,
    and the channel the last one kept, for as long as another request waits."""

    def __init__(self) -> None:
        self.order = asyncio.Lock()
        self.users = 0
        self.kept: Kept | None = None

    def idle(self) -> bool:
        return self.users == 0


# Per host connection (one operation's), per host:port: gone with the connection.
_lanes: weakref.WeakKeyDictionary[HostConnection, dict[tuple[str, int], _Lane]] = weakref.WeakKeyDictionary()


class _Turn:
    """One request's place on its lane: it waits for the one ahead (at most ``LANE_WAIT_S``), takes the stream that
    one kept, and keeps its own only for a request still waiting; the last to leave closes what is kept."""

    def __init__(self, lane: _Lane) -> None:
        self._lane = lane
        self._holding = False
        self.kept_one = False  # this request's channel went to the lane (not closed by the request)

    async def start(self) -> Kept | None:
        lane = self._lane
        lane.users += 1
        try:
            if lane.users == 1:  # alone on the lane: nobody holds or waits for it, the lock is taken at once
                await lane.order.acquire()
            else:
                async with asyncio.timeout(LANE_WAIT_S):
                    await lane.order.acquire()
        except TimeoutError:
            return None  # on a channel of its own, never kept
        self._holding = True
        # One turn of the loop: a request asked in the same turn joins the lane before this one can finish, and the
        # kept stream's waiting read takes what already arrived, unasked (then it is stale).
        await asyncio.sleep(0)
        kept, lane.kept = lane.kept, None  # (cancelled before this, it stays the lane's: its last user closes it)
        if kept is not None and kept.stale():
            await kept.aclose()
            return None
        return kept

    async def keep(self, stream: ByteStream, conn: h11.Connection) -> None:
        """The exchange's stream, both ends having left it open: kept only for a request waiting its turn."""
        lane = self._lane
        if self._holding and lane.users > 1 and lane.kept is None:
            lane.kept, self.kept_one = Kept(stream, conn), True
        else:
            await stream.aclose()

    async def end(self) -> None:
        lane = self._lane
        lane.users -= 1
        if self._holding:
            self._holding = False
            lane.order.release()
        if lane.users == 0 and lane.kept is not None:
            kept, lane.kept = lane.kept, None
            await kept.aclose()


async def run_probe(conn: HostConnection, probe: Probe) -> Finding:
    """Send the probe once and judge the answer (the probe check, as the runner sends it)."""
    from commands.verify.runner import ask  # the runner sends every HTTP check through this module

    return await ask(conn, ProbeCheck(probe))


def _headers(dest: str, port: int | None, https: bool, given: Mapping[str, str],
             body: bytes | None) -> list[tuple[str, str]]:
    """The headers httpx sent, with the caller's winning over the defaults (case-insensitively), except that the
    body is never compressed. No ``Connection: close``: HTTP/1.1 keeps the connection, so the request asked next on
    the lane may go over it (a caller's own ``Connection: close`` ends that)."""
    # Userinfo is neither sent nor put in a Host header: only host[:port] goes out, the port only when not default.
    host = f"[{dest}]" if ":" in dest else dest
    if port is not None and port != (443 if https else 80):
        host += f":{port}"
    defaults = [("Host", host), ("Accept", "*/*"), ("User-Agent", USER_AGENT)]
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
