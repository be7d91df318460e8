"""The bolt app under test, served by its real aiohttp adapter on loopback (HTTP mode)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from slack_bolt.async_app import AsyncApp


@contextlib.asynccontextmanager
async def serving(app: AsyncApp) -> AsyncIterator[str]:
    """Run app's ``/slack/events`` on 127.0.0.1 and yield that Request URL."""
    runner = web.AppRunner(app.web_app(path="/slack/events"))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    finally:
        await runner.cleanup()
