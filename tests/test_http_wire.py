"""Tier 1: the HTTP/1.1 exchange (h11) on recorded responses: every bound (deadline, header cap, body cap), the
framings (content-length, chunked, until-close), an endpoint that closes early or speaks no HTTP, each said as
the same problem text health and the probe showed before (commands/checks/health.py, probe.py judge it)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import h11
import pytest

from commands.checks.health import BODY_CAP_BYTES, HttpOutcome, health_finding
from commands.http_wire import HEADER_CAP_BYTES, READ_CHUNK, Answer, ByteStream, WireError, WireRequest, exchange

WHERE = "127.0.0.1:8000"
NO_RESPONSE = f"no HTTP response (RemoteProtocolError): the host could not reach {WHERE}: "
CAP_PASSED = f"HTTP 200, then the body passed {BODY_CAP_BYTES // 1024} KiB: not read further, not judged"


@dataclass
class Recorded:
    """A byte stream replaying recorded parts: bytes are read as they are (split at the reader's size), a float
    is a pause of that many seconds, None is the far end closing; after the last part, silence."""

    parts: list[bytes | float | None]
    sent: bytearray = field(default_factory=bytearray)
    closed: bool = False

    async def receive(self, max_bytes: int) -> bytes:
        while self.parts:
            part = self.parts[0]
            if isinstance(part, float):
                self.parts.pop(0)
                await asyncio.sleep(part)
            elif part is None:
                return b""
            else:
                self.parts[0] = part[max_bytes:]
                if not self.parts[0]:
                    self.parts.pop(0)
                return part[:max_bytes]
        await asyncio.Event().wait()  # an endpoint that sends nothing more and never closes
        raise AssertionError("unreachable")

    async def send(self, data: bytes) -> None:
        self.sent += data

    async def aclose(self) -> None:
        self.closed = True


def request(body: bytes | None = None) -> WireRequest:
    headers = [("Host", WHERE), ("Connection", "close")]
    if body is not None:
        headers.append(("Content-Length", str(len(body))))
    return WireRequest("POST" if body else "GET", "/health", headers, body, WHERE)


async def answer_to(*parts: bytes | float | None, timeout_s: float = 5, wire: WireRequest | None = None) -> Answer:
    stream = Recorded(list(parts))

    async def open_stream() -> ByteStream:
        return stream

    answer = await exchange(open_stream, wire or request(), timeout_s=timeout_s, body_cap=BODY_CAP_BYTES)
    assert stream.closed, "the channel is hung up whatever the answer"
    return answer


def ok_with(body: bytes, **headers: str) -> bytes:
    head = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
    return f"HTTP/1.1 200 OK\r\n{head}\r\n".encode() + body


async def test_the_request_goes_out_as_one_http11_message_with_its_body() -> None:
    stream = Recorded([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])

    async def open_stream() -> ByteStream:
        return stream

    await exchange(open_stream, request(b'{"a":1}'), timeout_s=5, body_cap=BODY_CAP_BYTES)
    server = h11.Connection(h11.SERVER)
    server.receive_data(bytes(stream.sent))
    sent = server.next_event()
    assert isinstance(sent, h11.Request)
    assert (sent.method, sent.target, dict(sent.headers)[b"connection"]) == (b"POST", b"/health", b"close")
    assert server.next_event() == h11.Data(data=b'{"a":1}')
    assert isinstance(server.next_event(), h11.EndOfMessage)


@pytest.mark.parametrize(("parts", "body"), [
    ([ok_with(b"ok", Content_Length="2")], "ok"),
    # chunked, the reads cut through a chunk's size line and its data
    ([ok_with(b"2\r\no", Transfer_Encoding="chunked"), b"k\r\n3", b"\r\n!!!\r\n0\r\n\r\n"], "ok!!!"),
    # no length: the body ends when the endpoint closes (HTTP/1.0 style)
    ([b"HTTP/1.0 200 OK\r\n\r\nuntil ", b"close", None], "until close"),
    ([b"HTTP/1.1 100 Continue\r\n\r\n", ok_with(b"ok", Content_Length="2")], "ok"),
    ([ok_with(b"caf\xe9", Content_Type="text/plain; charset=latin-1", Content_Length="4")], "café"),
    ([ok_with(b"ca\xff", Content_Type="text/plain; charset=no-such", Content_Length="3")], "ca\ufffd"),
    ([ok_with(b"okEXTRA", Content_Length="2")], "ok"),  # what follows the declared length is not the body
])
async def test_each_framing_gives_the_whole_body(parts: list[bytes | float | None], body: str) -> None:
    assert await answer_to(*parts) == Answer(200, body)


async def test_a_body_at_the_cap_is_judged_one_byte_past_it_is_not() -> None:
    at_cap = b"x" * BODY_CAP_BYTES
    assert await answer_to(ok_with(at_cap, Content_Length=str(len(at_cap)))) == Answer(200, at_cap.decode())
    past = at_cap + b"x"
    assert await answer_to(ok_with(past, Content_Length=str(len(past)))) == Answer(None, problem=CAP_PASSED)
    chunked = ok_with(b"%x\r\n" % len(past) + past + b"\r\n0\r\n\r\n", Transfer_Encoding="chunked")
    assert await answer_to(chunked) == Answer(None, problem=CAP_PASSED)


async def test_an_endless_body_is_cut_at_the_cap_without_waiting_for_its_end() -> None:
    # 200 without a length, then 64 KiB blocks that never end: the cap stops it, not the deadline
    answer = await answer_to(ok_with(b""), *[b"y" * 65536] * 4, timeout_s=60)
    assert answer == Answer(None, problem=CAP_PASSED)


async def test_headers_past_the_cap_are_refused_unread() -> None:
    near = ok_with(b"ok", X_Big="a" * (HEADER_CAP_BYTES - 1024), Content_Length="2")
    assert await answer_to(near) == Answer(200, "ok")
    # h11 judges what is still incomplete after a read: a head is never held past the cap plus one read
    past = ok_with(b"ok", X_Big="a" * (HEADER_CAP_BYTES + READ_CHUNK), Content_Length="2")
    assert await answer_to(past) == Answer(None, problem=NO_RESPONSE + "Receive buffer too long")
    # nor an endless header line that never ends (no CRLF, no close): the cap, not the deadline, stops it
    endless = await answer_to(b"HTTP/1.1 200 OK\r\nX-Endless: ", *[b"a" * 65536] * 4, timeout_s=60)
    assert endless == Answer(None, problem=NO_RESPONSE + "Receive buffer too long")


@pytest.mark.parametrize(("parts", "detail"), [
    ([None], "Server disconnected without sending a response."),
    ([b"HTTP/1.1 200 O", None], "Server disconnected without sending a response."),
    ([ok_with(b"hello", Content_Length="1000"), None],
     "peer closed connection without sending complete message body (received 5 bytes, expected 1000)"),
    ([ok_with(b"5\r\nab", Transfer_Encoding="chunked"), None],
     "peer closed connection without sending complete message body (incomplete chunked read)"),
])
async def test_an_endpoint_that_closes_early_is_no_response(parts: list[bytes | float | None], detail: str) -> None:
    answer = await answer_to(*parts)
    assert answer == Answer(None, problem=NO_RESPONSE + detail)
    assert health_finding(HttpOutcome("GET", answer.status, "", 0.1, answer.problem)).status == "fail"


@pytest.mark.parametrize(("parts", "detail"), [
    ([b"hello world\r\n\r\n"], "illegal status line: bytearray(b'hello world')"),
    ([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"], "illegal status line: bytearray(b'SSH-2.0-OpenSSH_9.6')"),
    ([b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"], "illegal status line"),
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"], "conflicting Content-Length headers"),
    ([ok_with(b"zz\r\nok\r\n0\r\n\r\n", Transfer_Encoding="chunked")], "illegal chunk header: bytearray(b'zz\\r\\n')"),
])
async def test_what_is_not_http_is_no_response_saying_why(parts: list[bytes | float | None], detail: str) -> None:
    answer = await answer_to(*parts)
    assert answer.status is None and answer.problem.startswith(NO_RESPONSE + detail), answer.problem


async def test_a_body_dripped_past_the_deadline_is_a_slow_drip_after_its_status() -> None:
    drip = [part for _ in range(40) for part in (b"y", 0.05)]
    answer = await answer_to(ok_with(b"", Content_Length="1000"), *drip, timeout_s=0.5)
    assert answer.status is None and answer.problem.startswith("HTTP 200 came, then the endpoint sent ")
    assert answer.problem.endswith(" bytes in 0.5 s and never finished: slow drip")
    assert int(answer.problem.split()[7]) > len(ok_with(b"", Content_Length="1000")), answer.problem


async def test_a_status_line_dripped_past_the_deadline_is_a_slow_drip_without_a_status() -> None:
    drip = [part for byte in b"HTTP/1.1 200 OK\r\n" for part in (bytes([byte]), 0.05)]
    answer = await answer_to(*drip, timeout_s=0.3)
    assert answer.status is None and answer.problem.startswith("the endpoint sent ")
    assert answer.problem.endswith(" bytes in 0.3 s and never finished: slow drip")


async def test_silence_is_no_answer() -> None:
    assert await answer_to(timeout_s=0.2) == Answer(None, problem="no answer within 0.2 s")


async def test_a_stream_that_breaks_says_where_it_broke() -> None:
    async def refused() -> ByteStream:
        raise WireError("ConnectError", "the host refused a channel")

    answer = await exchange(refused, request(), timeout_s=5, body_cap=BODY_CAP_BYTES)
    assert answer == Answer(None, problem=f"no HTTP response (ConnectError): the host could not reach {WHERE}: "
                                          "the host refused a channel")
    bad_header = WireRequest("GET", "/", [("Host", WHERE), ("X-Bad", "a\r\nInjected: 1")], None, WHERE)
    answer = await answer_to(b"never read", wire=bad_header)
    assert answer.problem.startswith(f"no HTTP response (LocalProtocolError): the host could not reach {WHERE}: ")
