"""A real ``proofbot serve`` for tests: started as users start it (HTTP on a loopback port, or Socket Mode) against
a Slack API (the fake, or a test's own), stopped with SIGTERM and killed if it does not stop, so no test leaves one
running; and the audit log's event kinds as the test reads them from another process."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from tests.conftest import REPO

SIGNING_SECRET = "s"
STOP_TIMEOUT_S = 60


class SlackApi(Protocol):
    """Where serve's Slack Web API calls go and the token it presents (the fake Slack is one)."""

    @property
    def api_url(self) -> str: ...

    @property
    def bot_token(self) -> str: ...


@dataclass(frozen=True)
class Endpoint:
    """A Slack API that is not the fake (a port that never answers, say)."""

    api_url: str
    bot_token: str


async def free_port() -> int:
    """A loopback TCP port nothing listens on now (the kernel's choice, then let go)."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()
    return port


Output = int | IO[bytes]


async def start_serve(slack: SlackApi, inventory: Path | str, db: Path | str, port: int | None = None, *,
                      secret: str | None = None, args: Sequence[str] = (), env: dict[str, str] | None = None,
                      stdout: Output = asyncio.subprocess.PIPE,
                      stderr: Output = asyncio.subprocess.PIPE) -> asyncio.subprocess.Process:
    """``proofbot serve`` in a child process: ``--http port`` on 127.0.0.1 with ``secret`` as the signing secret
    (default: the fake Slack's), or with no port Socket Mode (the fake's app token; no signing secret). ``env``
    adds to (or, with a value of "", takes out of) the environment it inherits."""
    environment = {**os.environ, "SLACK_BOT_TOKEN": slack.bot_token, "PROOFBOT_SLACK_API_URL": slack.api_url}
    if port is None:
        environment["SLACK_APP_TOKEN"] = str(getattr(slack, "app_token"))  # noqa: B009  (only the fake has one)
        environment.pop("SLACK_SIGNING_SECRET", None)
        where: list[str] = []
    else:
        environment["SLACK_SIGNING_SECRET"] = secret or str(getattr(slack, "signing_secret", SIGNING_SECRET))
        where = ["--http", str(port), "--host", "127.0.0.1"]
    for name, value in (env or {}).items():
        if value:
            environment[name] = value
        else:
            environment.pop(name, None)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "serve", *where, "--inventory", str(inventory), "--db", str(db), *args,
        cwd=REPO, env=environment, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=stderr)


async def gone(bot: asyncio.subprocess.Process) -> None:
    """Killed, if it is still running (a test that failed half-way leaves nothing behind)."""
    if bot.returncode is None:
        bot.kill()
        await bot.wait()


async def stop_serve(bot: asyncio.subprocess.Process, *, signal_number: int | None = signal.SIGTERM,
                     timeout_s: float = STOP_TIMEOUT_S) -> str:
    """Send ``signal_number`` (None: none, wait for it to end by itself), wait up to ``timeout_s`` for it to exit
    (killed otherwise), and return its stderr (empty when not piped)."""
    try:
        if signal_number is not None and bot.returncode is None:
            bot.send_signal(signal_number)
        _, err = await asyncio.wait_for(bot.communicate(), timeout_s)
    finally:
        await gone(bot)
    return (err or b"").decode(errors="replace")


async def stopped_cleanly(bot: asyncio.subprocess.Process, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """SIGTERM, as a service manager stops it: it must exit 0 with no traceback and no task exception left
    unretrieved; its stderr."""
    said = await stop_serve(bot, timeout_s=timeout_s)
    assert bot.returncode == 0, said[-3000:]
    assert "Traceback" not in said and "never retrieved" not in said, said[-3000:]
    return said


def kinds(db: Path, operation_id: str | None = None) -> list[str]:
    """The audit log's event kinds in order (of one operation), read as another process sees them; none while
    the database is still being created."""
    try:
        with closing(sqlite3.connect(db)) as conn:
            rows = conn.execute("SELECT kind, operation_id FROM events ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    return [kind for kind, op in rows if operation_id is None or op == operation_id]
