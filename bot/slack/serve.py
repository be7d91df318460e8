"""``proofbot serve``: run the Slack app in Socket Mode, or in HTTP mode at /slack/events."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from bot.slack.app import build_app
from bot.slack.context import BotContext
from bot.slack.recovery import recover_in_slack
from commands.errors import Refused, UsageError
from commands.inventory import Inventory
from commands.store.events import AuditStore

API_URL_ENV = "PROOFBOT_SLACK_API_URL"


@contextmanager
def only_serve_of(db: Path) -> Iterator[None]:
    """One ``serve`` per audit database: an OS lock on ``<db>.serve.lock``, freed by the kernel when
    the process ends however it ends, so a SIGKILLed bot never blocks the next one."""
    path = db.with_name(db.name + ".serve.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot open {path}: {exc.strerror}", hint="pass --db PATH") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
            raise Refused(f"another proofbot serve already uses {db}: {holder}",
                          hint="one serve per audit database; stop that one first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _require(name: str, why: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise UsageError(f"{name} is not set", hint=why)
    return value


async def serve(inventory: Inventory, db: Path, *, http_port: int | None, bind: str = "0.0.0.0") -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    bot_token = _require("SLACK_BOT_TOKEN", "the bot token (xoxb-…) of the Slack app")
    api_url = os.environ.get(API_URL_ENV) or None
    with only_serve_of(db):
        return await _serve(inventory, db, bot_token, api_url, http_port=http_port, bind=bind)


async def _serve(inventory: Inventory, db: Path, bot_token: str, api_url: str | None, *, http_port: int | None,
                 bind: str) -> int:
    audit = AuditStore.open(db)
    context = BotContext(inventory, audit)
    await audit.append("bot-started", actor="proofbot",
                       details={"mode": "http" if http_port else "socket", "hosts": sorted(inventory.hosts)})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        if http_port is not None:
            secret = _require("SLACK_SIGNING_SECRET", "HTTP mode verifies every request with it")
            app = build_app(context, bot_token=bot_token, signing_secret=secret, api_url=api_url)
            interrupted = await recover_in_slack(context, app.client)
            runner = web.AppRunner(app.web_app(path="/slack/events"))
            await runner.setup()
            await web.TCPSite(runner, bind, http_port).start()
            logging.info("proofbot listening on %s:%d/slack/events (%d interrupted operation(s) reported)",
                         bind, http_port, len(interrupted))
            try:
                await stop.wait()
            finally:
                await runner.cleanup()
        else:
            app_token = _require("SLACK_APP_TOKEN", "Socket Mode needs the app-level token (xapp-…)")
            app = build_app(context, bot_token=bot_token, api_url=api_url)
            await recover_in_slack(context, app.client)
            handler = AsyncSocketModeHandler(app, app_token, web_client=app.client)
            await handler.connect_async()  # type: ignore[no-untyped-call]
            try:
                await stop.wait()
            finally:
                await handler.close_async()  # type: ignore[no-untyped-call]
    finally:
        for timer in list(context.timers):
            timer.cancel()
        await audit.append("bot-stopped", actor="proofbot")
        audit.close()
    return 0
