"""Asyncio TCP proxy on 127.0.0.1 that adds one-way latency per direction and injects faults.

Simulates WAN round trips (this kernel has no netem); blackhole() stalls, reset() sends RSTs.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from dataclasses import dataclass
from typing import Self


@dataclass(eq=False)  # identity hash: kept in a set
class _Conn:
    client: asyncio.StreamWriter
    handler: asyncio.Task[object] | None = None
    upstream: asyncio.StreamWriter | None = None


def _abort(writer: asyncio.StreamWriter | None) -> None:
    """Close abruptly: SO_LINGER 0 makes the kernel send RST instead of FIN."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class DelayProxy:
    """Forward 127.0.0.1:<port> to (target_host, target_port).

    delay_s is the one-way delay added in each direction (so RTT grows by 2 * delay_s);
    up_delay_s / down_delay_s override it for client->target / target->client. All delays
    and fault modes can be changed while connections are open.
    """

    def __init__(self, target_host: str, target_port: int, delay_s: float = 0.0,
                 up_delay_s: float | None = None, down_delay_s: float | None = None,
                 listen_host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.up_delay_s = delay_s if up_delay_s is None else up_delay_s
        self.down_delay_s = delay_s if down_delay_s is None else down_delay_s
        self.listen_host = listen_host
        self.port = port
        self.accepted = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    # -- control -------------------------------------------------------------------
    def set_delay(self, delay_s: float) -> None:
        self.up_delay_s = self.down_delay_s = delay_s

    @property
    def blackholed(self) -> bool:
        return not self._flowing.is_set()

    def blackhole(self) -> None:
        """Stop forwarding in both directions; sockets stay open, data is held, new
        connections are accepted but not connected upstream (like a dead link)."""
        self._flowing.clear()

    def restore(self) -> None:
        """Resume forwarding (held data is then delivered, as TCP would after an outage)."""
        self._flowing.set()

    def reset(self) -> None:
        """Abort every open connection (RST to both sides). New connections still work."""
        for conn in list(self._conns):
            _abort(conn.client)
            _abort(conn.upstream)
            if conn.handler is not None:
                conn.handler.cancel()

    @property
    def connections(self) -> int:
        return len(self._conns)

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> int:
        """Listen and return the port (chosen by the kernel when port=0)."""
        self._server = await asyncio.start_server(self._handle, self.listen_host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [c.handler for c in self._conns if c.handler is not None]
        self.reset()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- forwarding ----------------------------------------------------------------
    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self.accepted += 1
        conn = _Conn(client=cwriter, handler=asyncio.current_task())
        self._conns.add(conn)
        tasks: list[asyncio.Task[None]] = []
        try:
            await self._flowing.wait()  # a blackholed link accepts but never connects
            ureader, uwriter = await asyncio.open_connection(*self.target)
            conn.upstream = uwriter
            loop = asyncio.get_running_loop()
            tasks = [loop.create_task(self._direction(creader, uwriter, True)),
                     loop.create_task(self._direction(ureader, cwriter, False))]
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            if any(t.exception() is not None for t in done):  # one side broke: break both
                _abort(cwriter)
                _abort(uwriter)
        except (OSError, asyncio.CancelledError):
            _abort(cwriter)
            _abort(conn.upstream)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._conns.discard(conn)
            for w in (conn.upstream, cwriter):
                if w is not None:
                    w.close()
                    with contextlib.suppress(Exception):
                        await w.wait_closed()

    async def _direction(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         upward: bool) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def pump_in() -> None:
            while True:
                data = await reader.read(65536)
                delay = self.up_delay_s if upward else self.down_delay_s
                await queue.put((time.monotonic() + delay, data))
                if not data:
                    return

        async def pump_out() -> None:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                if upward:
                    self.bytes_up += len(data)
                else:
                    self.bytes_down += len(data)
                await writer.drain()

        inp = asyncio.ensure_future(pump_in())
        out = asyncio.ensure_future(pump_out())
        try:
            await asyncio.gather(inp, out)
        finally:
            for t in (inp, out):
                t.cancel()
            await asyncio.gather(inp, out, return_exceptions=True)


async def start_proxy(target_host: str, target_port: int, delay_s: float = 0.0) -> DelayProxy:
    """Convenience: create and start a proxy; remember to `await proxy.stop()`."""
    proxy = DelayProxy(target_host, target_port, delay_s)
    await proxy.start()
    return proxy
