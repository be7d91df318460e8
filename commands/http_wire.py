"""One HTTP/1.1 exchange on a byte stream with h11, bounded: a deadline over the whole of it, a header cap, a body
cap; a stream both ends left open after a clean exchange may be ``Kept`` for the next request (keep-alive). Pure over
the stream it is given, so every bound is tested on recorded bytes."""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, Protocol

import h11

from commands.awake import awake_timeout

READ_CHUNK = 65536
# The status line and headers (or a chunk's size line, or the trailers) are held at most this long unfinished, as
# httpcore had h11 do: a head still incomplete past it after a read is "Receive buffer too long", nothing more is
# read. (So a whole head is at most this plus one READ_CHUNK.)
HEADER_CAP_BYTES = 100 * 1024


class ByteStream(Protocol):
    """A connection's bytes: a direct-tcpip channel, or TLS over one."""

    async def receive(self, max_bytes: int) -> bytes:
        """Up to max_bytes; b"" once the far end has closed. Raises ``WireError`` when the stream broke."""

    async def send(self, data: bytes) -> None:
        """All of data, or ``WireError``."""

    async def aclose(self) -> None:
        """Hang up (never waits on the far end)."""


class WireError(Exception):
    """The request could not complete: ``kind`` names the stage as httpx did (ConnectError, ReadError, WriteError,
    RemoteProtocolError, LocalProtocolError), the message says what happened."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class WireRequest(NamedTuple):  # NamedTuples: immutable, a fifth of a frozen dataclass's cost to define
    """What goes out: ``where`` (host:port) is only for saying what could not be reached."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes | None
    where: str


class Answer(NamedTuple):
    """``status`` is None unless the whole response came within the deadline and the caps; ``problem`` says why."""

    status: int | None
    body: str = ""
    problem: str = ""


class _Seen:
    """What came of one exchange so far (a plain class: a dataclass costs more to define than this one saves)."""

    __slots__ = ("body", "charset", "received", "status")

    def __init__(self) -> None:
        self.received = 0  # bytes that arrived: the difference between "no answer" and a slow drip
        self.status: int | None = None
        self.charset = "utf-8"
        self.body = bytearray()


class Kept:
    """A stream whose last exchange ended whole with neither end closing it (no ``Connection: close``, nothing past
    the response), with its h11 state: the next request to the same host:port may go over it.

    While kept, one read waits on it: anything that arrives before the next request is sent (a body longer than its
    Content-Length in a later packet, the far end closing) makes it ``stale``, never the start of the next answer.
    """

    def __init__(self, stream: ByteStream, conn: h11.Connection) -> None:
        self.stream = stream
        self.conn = conn
        self._early: asyncio.Future[bytes] | None = asyncio.ensure_future(stream.receive(READ_CHUNK))

    def stale(self) -> bool:
        """Whether something came (bytes, the end, a failure) while nothing was asked: then it is never reused."""
        return self._early is None or self._early.done()

    def take(self) -> tuple[ByteStream, h11.Connection]:
        """The stream (its pending read now waits for the next answer) and its h11 state, ready for a new request."""
        early, self._early = self._early, None
        assert early is not None and not early.done(), "a stale stream is closed, never reused"
        self.conn.start_next_cycle()
        return _Pending(self.stream, early), self.conn

    async def aclose(self) -> None:
        if self._early is not None:
            self._early.cancel()
            await asyncio.gather(self._early, return_exceptions=True)
            self._early = None
        await self.stream.aclose()


class _Pending:
    """A kept stream whose first read was already waiting: the answer's first bytes come from it."""

    def __init__(self, stream: ByteStream, early: asyncio.Future[bytes]) -> None:
        self._stream = stream
        self._early: asyncio.Future[bytes] | None = early

    async def receive(self, max_bytes: int) -> bytes:
        if self._early is None:
            return await self._stream.receive(max_bytes)
        early, self._early = self._early, None
        return await early  # at most READ_CHUNK, the size every reader here asks for

    async def send(self, data: bytes) -> None:
        await self._stream.send(data)

    async def aclose(self) -> None:
        if self._early is not None:
            self._early.cancel()
            await asyncio.gather(self._early, return_exceptions=True)
        await self._stream.aclose()


async def exchange(open_stream: Callable[[], Awaitable[ByteStream]], request: WireRequest, *, timeout_s: float,
                   body_cap: int, kept: Kept | None = None,
                   keep: Callable[[ByteStream, h11.Connection], Awaitable[None]] | None = None) -> Answer:
    """Open the stream (or take ``kept``), send request, read the answer to its end: all of it within timeout_s
    (``awake_timeout``: each read alone never times out, so an endpoint sending a byte every 2 s is caught only as
    a whole). A kept stream that turns out closed before any byte of the answer came (the far end may close an
    idle connection, RFC 9112 9.6) is replaced by a new one, once, within the same deadline. With ``keep``, a
    stream both ends left open is handed to it instead of closed."""
    seen = _Seen()
    stream: ByteStream | None = None
    conn: h11.Connection | None = None
    whole = False
    try:
        async with awake_timeout(timeout_s):
            if kept is not None:
                stream, conn = kept.take()
                try:
                    await _send_and_read(conn, stream, request, seen, body_cap)
                except WireError as exc:
                    if seen.received or exc.kind == "LocalProtocolError":
                        raise
                    await stream.aclose()
                    stream = conn = None
            if conn is None:
                stream = await open_stream()
                conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEADER_CAP_BYTES)
                await _send_and_read(conn, stream, request, seen, body_cap)
        whole = True
    except TimeoutError:
        if not seen.received:
            return Answer(None, problem=f"no answer within {timeout_s:g} s")
        head = f"HTTP {seen.status} came, then " if seen.status is not None else ""
        return Answer(None, problem=f"{head}the endpoint sent {seen.received} bytes in {timeout_s:g} s and never "
                                    "finished: slow drip")
    except _TooLarge:
        return Answer(None, problem=f"HTTP {seen.status}, then the body passed {body_cap // 1024} KiB: "
                                    "not read further, not judged")
    except WireError as exc:
        problem = f"no HTTP response ({exc.kind}): the host could not reach {request.where}"
        detail = str(exc).strip()
        return Answer(None, problem=f"{problem}: {detail[:300]}" if detail else problem)
    finally:
        if stream is not None and not (whole and keep is not None and conn is not None and _reusable(conn)):
            await stream.aclose()
            stream = None
    if keep is not None and stream is not None and conn is not None:
        await keep(stream, conn)  # it keeps it (``Kept``) or closes it
    return Answer(seen.status, bytes(seen.body).decode(seen.charset, "replace"))


def _reusable(conn: h11.Connection) -> bool:
    """The exchange ended whole, neither end said close, and nothing came past the end of the answer."""
    return (conn.our_state is h11.DONE and conn.their_state is h11.DONE
            and conn.trailing_data == (b"", False))


async def _send_and_read(conn: h11.Connection, stream: ByteStream, request: WireRequest, seen: _Seen,
                         body_cap: int) -> None:
    await stream.send(_request_bytes(conn, request))
    await _read(conn, stream, seen, body_cap)


class _TooLarge(Exception):
    pass


def _request_bytes(conn: h11.Connection, request: WireRequest) -> bytes:
    try:
        head = conn.send(h11.Request(method=request.method, target=request.target, headers=request.headers))
        body = conn.send(h11.Data(data=request.body)) if request.body else b""
        end = conn.send(h11.EndOfMessage())
    except (h11.LocalProtocolError, UnicodeEncodeError) as exc:
        raise WireError("LocalProtocolError", str(exc)) from exc
    return b"".join(part or b"" for part in (head, body, end))


async def _read(conn: h11.Connection, stream: ByteStream, seen: _Seen, body_cap: int) -> None:
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise WireError("RemoteProtocolError", str(exc)) from exc
        if event is h11.NEED_DATA:
            data = await stream.receive(READ_CHUNK)
            seen.received += len(data)
            if not data and conn.their_state is h11.SEND_RESPONSE:
                raise WireError("RemoteProtocolError", "Server disconnected without sending a response.")
            conn.receive_data(data)
        elif isinstance(event, h11.Response):
            seen.status = event.status_code
            seen.charset = _charset(event.headers)
        elif isinstance(event, h11.Data):
            seen.body += event.data
            if len(seen.body) > body_cap:
                raise _TooLarge
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed) or event is h11.PAUSED:
            return  # the answer is whole (PAUSED: h11 has nothing more to give on this connection)


def _charset(headers: Sequence[tuple[bytes, bytes]]) -> str:
    """The Content-Type's charset when Python knows it, else UTF-8 (as httpx decoded)."""
    for name, value in headers:
        if name == b"content-type":
            for param in value.decode("latin-1").split(";")[1:]:
                key, _, charset = param.strip().partition("=")
                if key.strip().lower() == "charset":
                    try:
                        return codecs.lookup(charset.strip().strip("\"'")).name
                    except LookupError:
                        break
    return "utf-8"
