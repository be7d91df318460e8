"""A hostile HTTP endpoint for tests: answers slowly, endlessly or never, on purpose.

Importable (``await serve(mode, port)`` in the test's own loop, for tier 1) and runnable as a
script inside a namespace host (``python3 drip_server.py MODE PORT``; prints ``listening``
once bound), for tier 2. Modes:

``drip-body``  status and headers at once (Content-Length 1000), then one body byte every 0.5 s
``drip-head``  the status line itself, one byte every 0.5 s
``endless``    200 without a length, then 64 KiB blocks until the peer hangs up
``silent``     accepts, reads the request, never writes
``ok``         200 "ok" at once (with ``ssl`` for the https tests)
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import sys
from dataclasses import dataclass, field

DRIP_INTERVAL_S = 0.5
BLOCK = b"x" * 65536


@dataclass
class Stats:
    """What the server saw: connections accepted, bytes written, connections the peer ended."""

    accepted: int = 0
    sent: int = 0
    ended: int = 0
    requests: list[bytes] = field(default_factory=list)


async def _handle(mode: str, stats: Stats, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    stats.accepted += 1
    try:
        stats.requests.append(await reader.readuntil(b"\r\n\r\n"))
        if mode == "ok":
            await _send(writer, stats, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        elif mode == "drip-body":
            await _send(writer, stats, b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            await _drip(writer, stats, b"y" * 1000)
        elif mode == "drip-head":
            await _drip(writer, stats, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        elif mode == "endless":
            await _send(writer, stats, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
            while True:
                await _send(writer, stats, BLOCK)
        elif mode == "silent":
            await reader.read()  # until the peer hangs up
    except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
        pass
    finally:
        stats.ended += 1
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


async def _send(writer: asyncio.StreamWriter, stats: Stats, data: bytes) -> None:
    writer.write(data)
    await writer.drain()
    stats.sent += len(data)


async def _drip(writer: asyncio.StreamWriter, stats: Stats, data: bytes) -> None:
    for index in range(len(data)):
        await _send(writer, stats, data[index : index + 1])
        await asyncio.sleep(DRIP_INTERVAL_S)


async def serve(mode: str, port: int = 0, *, host: str = "127.0.0.1",
                ssl_context: ssl.SSLContext | None = None) -> tuple[asyncio.Server, Stats]:
    stats = Stats()
    server = await asyncio.start_server(lambda r, w: _handle(mode, stats, r, w), host, port, ssl=ssl_context)
    return server, stats


def port_of(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


async def _main(mode: str, port: int) -> None:
    server, _ = await serve(mode, port)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], int(sys.argv[2])))
