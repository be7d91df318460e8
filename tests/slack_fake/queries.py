"""What a test asks the fake: the calls, messages, threads and response_url posts it recorded, and
waiting (with a deadline) until something arrives: a mixin of `FakeSlack`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .records import (
    Call,
    Message,
    ResponsePost,
)


class Queries:
    """What was recorded, and waiting for it."""

    # ------------------------------------------------------------------ inspection
    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def message(self, channel: str, ts: str) -> Message:
        return self.messages[(channel, ts)]

    def messages_in(self, channel: str) -> list[Message]:
        return [m for m in self.messages.values() if m.channel == channel]

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """Replies in the thread rooted at `thread_ts` (excluding the parent)."""
        return [
            m
            for m in self.messages.values()
            if m.channel == channel and m.thread_ts == thread_ts and m.ts != thread_ts
        ]

    def responses_to(self, url: str) -> list[ResponsePost]:
        return [r for r in self.responses if r.url == url]

    @property
    def open_connections(self) -> int:
        """The TCP connections Web API calls came over that the client has not closed yet."""
        return sum(1 for transport in list(self._connection_of) if not transport.is_closing())

    @property
    def socket_connections(self) -> int:
        return len(self._sockets)

    async def wait_for(
        self, method: str, count: int = 1, timeout: float = 10.0  # noqa: ASYNC109
    ) -> list[Call]:
        """Wait until `method` has been called at least `count` times; returns those calls."""
        await self._wait_until(
            lambda: len(self.calls_to(method)) >= count,
            timeout,
            lambda: f"{count} call(s) to {method} (got {len(self.calls_to(method))})",
        )
        return self.calls_to(method)

    async def wait_for_response(
        self, url: str, count: int = 1, timeout: float = 10.0  # noqa: ASYNC109
    ) -> list[ResponsePost]:
        await self._wait_until(
            lambda: len(self.responses_to(url)) >= count,
            timeout,
            lambda: f"{count} POST(s) to {url} (got {len(self.responses_to(url))})",
        )
        return self.responses_to(url)

    async def wait_for_socket(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        await self._wait_until(
            lambda: bool(self._sockets), timeout, lambda: "a Socket Mode connection"
        )

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self._notify()

    def _notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float = 10.0,  # noqa: ASYNC109
        what: str = "condition",
    ) -> None:
        """Wait until `predicate()` holds; re-checked whenever the fake's state changes."""
        await self._wait_until(predicate, timeout, lambda: what)

    async def _wait_until(
        self, predicate: Callable[[], bool], limit: float, what: Callable[[], str]
    ) -> None:
        try:
            async with asyncio.timeout(limit):
                while True:
                    event = self._event
                    if predicate():
                        return
                    await event.wait()
        except TimeoutError:
            raise TimeoutError(f"timed out after {limit}s waiting for {what()}") from None
