"""The one HTTP session every Slack Web API call of a ``serve`` goes through: TCP (and TLS) connections kept
alive and reused, at most SLACK_CONNECTIONS at once, every call bounded, all closed when serve stops."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp

# Slack is one host; a few connections carry many calls (a call is ms on loopback, ~100 ms to Slack). Calls past
# this many at once wait for a free connection, inside their own timeout.
SLACK_CONNECTIONS = 16
# slack_sdk's own per-call bound (its `timeout`, which it applies only to the sessions it makes itself): a call,
# its wait for a connection included, ends by then; reaching Slack may take CONNECT_S of it.
CALL_S = 30.0
CONNECT_S = 10.0
# An idle connection is closed after this long: Slack's edge closes idle ones too (a call that finds one closed
# under it is retried once by slack_sdk's connection-error handler, bot/slack/app.py).
IDLE_S = 15.0


@contextlib.asynccontextmanager
async def slack_session() -> AsyncIterator[aiohttp.ClientSession]:
    """An aiohttp session for ``AsyncWebClient(session=…)``; its connections closed on leaving."""
    connector = aiohttp.TCPConnector(limit=SLACK_CONNECTIONS, limit_per_host=SLACK_CONNECTIONS,
                                     keepalive_timeout=IDLE_S)
    timeout = aiohttp.ClientTimeout(total=CALL_S, sock_connect=CONNECT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        yield session
