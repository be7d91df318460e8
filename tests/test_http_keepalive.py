"""Tier 1: a second request over the stream the first one kept (HTTP/1.1 keep-alive), on scripted endpoints: kept only
after a whole answer with nothing past it, never read as the next answer when the far end sent more or closed, sent
again on a new stream when the kept one turns out closed, and every bound (deadline, caps) still the request's own."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import h11

from commands.checks.health import BODY_CAP_BYTES
from commands.host_http import _Lane, _Turn
from commands.http_wire import Answer, ByteStream, Kept, WireRequest, exchange

WHERE = "127.0.0.1:8000"
NO_RESPONSE = f"no HTTP response (RemoteProtocolError): the host could not reach {WHERE}: "
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
READY = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nready"

Part = bytes | float | None  # bytes arrive, a float is a pause, None is the far end closing


@dataclass
class Endpoint:
    """A scripted server behind one stream: ``answers[i]`` is sent once the i-th request arrived whole; ``idle``
    parts (keyed by the answer they follow) arrive right after that answer, unasked."""

    answers: list[list[Part]]
    idle: dict[int, list[Part]] = field(default_factory=dict)
    requests: list[bytes] = field(default_factory=list)


class Scripted:
    """The bot's end of one stream to an ``Endpoint``."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.inbox: asyncio.Queue[Part] = asyncio.Queue()
        self.server = h11.Connection(h11.SERVER)
        self.closed = False
        self.eof = False

    async def receive(self, max_bytes: int) -> bytes:
        while True:
            if self.eof:
                return b""
            part = await self.inbox.get()
            if isinstance(part, float):
                await asyncio.sleep(part)
            elif part is None:
                self.eof = True
            else:
                if len(part) > max_bytes:
                    self.inbox._queue.appendleft(part[max_bytes:])  # type: ignore[attr-defined]
                return part[:max_bytes]

    async def send(self, data: bytes) -> None:
        self.server.receive_data(data)
        while (event := self.server.next_event()) is not h11.NEED_DATA:
            if isinstance(event, h11.EndOfMessage):
                index = len(self.endpoint.requests)
                self.endpoint.requests.append(data)
                for part in self.endpoint.answers[index] if index < len(self.endpoint.answers) else []:
                    self.inbox.put_nowait(part)
                for part in self.endpoint.idle.get(index, []):
                    self.inbox.put_nowait(part)
                self.server = h11.Connection(h11.SERVER)  # the next request starts a new cycle on this end
                break

    async def aclose(self) -> None:
        self.closed = True


class Opener:
    """``open_stream`` for exchange: each call a new stream to a new endpoint from ``endpoints``."""

    def __init__(self, *endpoints: Endpoint) -> None:
        self.endpoints = list(endpoints)
        self.opened: list[Scripted] = []

    async def __call__(self) -> ByteStream:
        stream = Scripted(self.endpoints[len(self.opened)])
        self.opened.append(stream)
        return stream


def get(path: str, *extra: tuple[str, str]) -> WireRequest:
    return WireRequest("GET", path, [("Host", WHERE), *extra], None, WHERE)


async def in_turn(turn: _Turn, opener: Opener, path: str, timeout_s: float) -> Answer:
    """One request on its lane, as ``fetch_via_host`` sends it."""
    try:
        kept = await turn.start()
        return await exchange(opener, get(path), timeout_s=timeout_s, body_cap=BODY_CAP_BYTES, kept=kept,
                              keep=turn.keep)
    finally:
        await turn.end()


async def two_requests(opener: Opener, *, second_timeout_s: float = 5) -> tuple[Answer, Answer, list[Kept]]:
    """health, then the probe, asked together on one lane (the probe waits its turn, then takes what health kept)."""
    lane = _Lane()
    kept: list[Kept] = []
    health, probe = _Turn(lane), _Turn(lane)
    keep = health.keep

    async def keeping(stream: ByteStream, conn: h11.Connection) -> None:
        await keep(stream, conn)
        if lane.kept is not None:
            kept.append(lane.kept)

    health.keep = keeping  # type: ignore[method-assign]
    first, second = await asyncio.gather(in_turn(health, opener, "/health", 5),
                                         in_turn(probe, opener, "/v1/chat/completions", second_timeout_s))
    assert lane.idle() and lane.kept is None, "nothing is kept once nobody waits"
    return first, second, kept


async def test_the_second_request_goes_over_the_stream_the_first_kept() -> None:
    endpoint = Endpoint([[OK], [READY]])
    opener = Opener(endpoint)
    first, second, kept = await two_requests(opener)
    assert (first, second) == (Answer(200, "ok"), Answer(200, "ready")) and len(kept) == 1
    assert len(opener.opened) == 1 and len(endpoint.requests) == 2, "one channel for both"
    assert b"connection: close" not in endpoint.requests[0].lower()
    assert opener.opened[0].closed, "the last request hangs up"


async def test_an_endpoint_that_closes_between_the_requests_gets_the_second_on_a_new_stream() -> None:
    closing = Endpoint([[OK]], idle={0: [None]})
    fresh = Endpoint([[READY]])
    opener = Opener(closing, fresh)
    first, second, kept = await two_requests(opener)
    assert (first, second) == (Answer(200, "ok"), Answer(200, "ready")) and len(kept) == 1
    assert len(opener.opened) == 2 and opener.opened[0].closed and opener.opened[1].closed
    assert len(closing.requests) == 1, "nothing was sent on the stream the far end had closed"


async def test_a_stream_found_closed_only_after_the_request_went_out_is_sent_again_on_a_new_one() -> None:
    # the far end closes its idle connection just as the request goes out: no byte of an answer, so it is retried
    closing = Endpoint([[OK], [None]])
    fresh = Endpoint([[READY]])
    opener = Opener(closing, fresh)
    first, second, _ = await two_requests(opener)
    assert (first, second) == (Answer(200, "ok"), Answer(200, "ready"))
    assert len(opener.opened) == 2 and all(stream.closed for stream in opener.opened)


async def test_an_answer_cut_short_on_the_kept_stream_is_not_sent_again() -> None:
    # bytes of an answer came: the request may have been acted on, so it is said, never repeated
    cut = Endpoint([[OK], [b"HTTP/1.1 200 O", None]])
    opener = Opener(cut, Endpoint([[READY]]))
    _, second, _ = await two_requests(opener)
    assert second == Answer(None, problem=NO_RESPONSE + "Server disconnected without sending a response.")
    assert len(opener.opened) == 1


async def test_a_body_longer_than_its_content_length_is_never_read_as_the_next_answer() -> None:
    # in the same read: h11 holds what follows the body, so the stream is not kept
    same_read = Endpoint([[OK + b"HTTP/1.1 500 Forged\r\nContent-Length: 0\r\n\r\n"], [READY]])
    opener = Opener(same_read, Endpoint([[READY]]))
    first, second, kept = await two_requests(opener)
    assert (first, second, kept) == (Answer(200, "ok"), Answer(200, "ready"), [])
    assert len(opener.opened) == 2 and opener.opened[0].closed
    # in a later packet, unasked: the kept stream is stale and closed, the next request opens its own
    later = Endpoint([[OK], [READY]], idle={0: [b"HTTP/1.1 500 Forged\r\nContent-Length: 0\r\n\r\n"]})
    opener = Opener(later, Endpoint([[READY]]))
    first, second, kept = await two_requests(opener)
    assert (first, second) == (Answer(200, "ok"), Answer(200, "ready"))
    assert len(kept) == 1 and len(opener.opened) == 2 and opener.opened[0].closed
    assert len(later.requests) == 1


async def test_connection_close_on_either_side_keeps_nothing() -> None:
    said_close = Endpoint([[b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"]])
    kept: list[ByteStream] = []

    async def keep(stream: ByteStream, conn: h11.Connection) -> None:
        kept.append(stream)

    opener = Opener(said_close)
    assert await exchange(opener, get("/health"), timeout_s=5, body_cap=BODY_CAP_BYTES, keep=keep) == Answer(200, "ok")
    asked_close = Opener(Endpoint([[OK]]))
    answer = await exchange(asked_close, get("/health", ("Connection", "close")), timeout_s=5,
                            body_cap=BODY_CAP_BYTES, keep=keep)
    assert answer == Answer(200, "ok") and kept == []
    assert opener.opened[0].closed and asked_close.opened[0].closed
    # an HTTP/1.0 answer (the connection ends with it) and an answer cut at the cap are never kept either
    old = Opener(Endpoint([[b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"]]))
    assert await exchange(old, get("/health"), timeout_s=5, body_cap=BODY_CAP_BYTES, keep=keep) == Answer(200, "ok")
    big = Opener(Endpoint([[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"]]))
    capped = await exchange(big, get("/health"), timeout_s=5, body_cap=4, keep=keep)
    assert capped.status is None and kept == [] and old.opened[0].closed and big.opened[0].closed


async def test_the_second_requests_bounds_are_its_own_on_the_kept_stream() -> None:
    drip = [part for _ in range(40) for part in (b"y", 0.05)]
    dripping = Endpoint([[OK], [b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", *drip]])
    opener = Opener(dripping)
    _, second, _ = await two_requests(opener, second_timeout_s=0.5)
    assert second.status is None and second.problem.startswith("HTTP 200 came, then the endpoint sent ")
    assert second.problem.endswith(" bytes in 0.5 s and never finished: slow drip")
    assert len(opener.opened) == 1 and opener.opened[0].closed
    garbage = Opener(Endpoint([[OK], [b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]]))
    _, second, _ = await two_requests(garbage)
    assert second.status is None and second.problem.startswith(NO_RESPONSE + "illegal status line")
    silent = Opener(Endpoint([[OK], []]))
    _, second, _ = await two_requests(silent, second_timeout_s=0.2)
    assert second == Answer(None, problem="no answer within 0.2 s")
