"""``proofbot serve``: run the Slack app in Socket Mode, or in HTTP mode at /slack/events; on a SQLite file one
``serve`` per file, on PostgreSQL any number of replicas (their leases: commands/store/leases.py)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

from bot.logs import configure_logging
from bot.metrics import DEFAULT_ADDRESS, Metrics, start_metrics_server
from bot.slack.app import build_app
from bot.slack.listening import BotContext
from bot.slack.outbox import LeftOut, LeftOutRecorder, record_left_out
from bot.slack.recovery import recover_in_slack, take_over_leases
from bot.slack.session import slack_session
from bot.slack.watch import start_watch, stop_watch
from commands.approvers import GroupCache
from commands.errors import Refused, UsageError
from commands.inventory import Inventory
from commands.ssh import warm_connections
from commands.store.db import AuditStore
from commands.store.log import bot_log

API_URL_ENV = "PROOFBOT_SLACK_API_URL"
# How long a stopping serve waits for requests in flight (docs/deployment.md): within `docker stop`'s 10 s grace;
# PROOFBOT_DRAIN_S sets it to another orchestrator's (systemd's TimeoutStopSec, Kubernetes' grace period).
DRAIN_S = 8.0
DRAIN_ENV = "PROOFBOT_DRAIN_S"


def drain_s() -> float:
    """``PROOFBOT_DRAIN_S`` (seconds, 0 to 3600) or ``DRAIN_S``; anything else refused before serve starts."""
    written = os.environ.get(DRAIN_ENV, "").strip()
    if not written:
        return DRAIN_S
    try:
        value = float(written)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise UsageError(f"{DRAIN_ENV}={written!r} is not a number of seconds from 0 to 3600",
                         hint=f"unset it for the default, {DRAIN_S:g} s")
    return value
T = TypeVar("T")


def is_served(db: Path) -> bool:
    """True while a ``serve`` holds ``db`` (its lock cannot be taken): the container health check."""
    try:
        fd = os.open(db.with_name(db.name + ".serve.lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


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


@dataclass(frozen=True)
class MetricsAt:
    """``--metrics-port`` and ``--metrics-address``: where /metrics is served (off when not given)."""

    port: int
    address: str = DEFAULT_ADDRESS


async def serve(inventory: Inventory, db: Path | str, *, http_port: int | None, bind: str = "0.0.0.0",
                metrics_at: MetricsAt | None = None) -> int:
    configure_logging()
    bot_token = _require("SLACK_BOT_TOKEN", "the bot token (xoxb-…) of the Slack app")
    drain = drain_s()
    api_url = os.environ.get(API_URL_ENV) or None
    # PostgreSQL: replicas share the database; each lock and plan names its holder and lease instead.
    with only_serve_of(db) if isinstance(db, Path) else contextlib.nullcontext():
        # The watch, /verify, restarts and restores share warm SSH connections (ssh.idle_close_s), closed at exit.
        # Slack's Web API calls share one session's kept-alive connections, closed after the drain, too.
        async with warm_connections(), slack_session() as session:
            return await _serve(inventory, db, bot_token, api_url, http_port=http_port, bind=bind,
                                metrics_at=metrics_at, drain=drain, session=session)


async def _serve(inventory: Inventory, db: Path | str, bot_token: str, api_url: str | None, *, http_port: int | None,
                 bind: str, metrics_at: MetricsAt | None, drain: float = DRAIN_S,
                 session: aiohttp.ClientSession | None = None) -> int:
    # Signals first: SIGTERM and Ctrl-C stop the bot at any moment, also while Slack cannot be reached.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    secret = _require("SLACK_SIGNING_SECRET", "HTTP mode verifies every request with it") if http_port else None
    app_token = None if http_port else _require("SLACK_APP_TOKEN", "Socket Mode needs the app-level token (xapp-…)")
    audit = AuditStore.open(db)
    context = BotContext(inventory, audit, groups=GroupCache(ttl_s=inventory.approvals.group_ttl_s))
    metrics = Metrics(in_flight=lambda: len(context.inflight.running()))
    stop_metrics = None
    try:
        if metrics_at is not None:  # before Slack: a scrape shows a bot that cannot connect, too
            stop_metrics, port = await start_metrics_server(metrics, audit, metrics_at.address, metrics_at.port)
            logging.info("proofbot metrics at http://%s:%d/metrics", metrics_at.address, port)
        app = build_app(context, bot_token=bot_token, signing_secret=secret, api_url=api_url, session=session)
        record_left_out(app.client, left_out_recorder(audit, context.keep))  # a full outbox's drops, in the audit log
        with metrics.installed():
            close = await _unless_stopped(stop, _start(app, context, app_token, http_port, bind))
            if close is None:
                logging.info("proofbot stopped before it was connected to Slack")
                return 0
            # Recorded only now: the tokens were accepted and the bot is reachable.
            await bot_log(audit).bot_started("http" if http_port else "socket", sorted(inventory.hosts))
            watching = start_watch(context, app.client)  # the inventory's watch entries, until shutdown
            if audit.dialect == "postgresql":  # replicas: a dead one's operations and plans are taken over
                context.keep(asyncio.create_task(take_over_leases(context, app.client)))
            try:
                await stop.wait()
            finally:
                await stop_watch(watching)
                await close()  # no new requests; those in flight end (or are cancelled) before the store closes
                await _drain(context.listeners, drain)
                await bot_log(audit).bot_stopped()
                record_left_out(app.client, None)
    finally:
        if stop_metrics is not None:
            await stop_metrics()
        timers = list(context.timers)
        for timer in timers:
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)  # ended before the store closes (gh-106905)
        audit.close()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return 0


def left_out_recorder(audit: AuditStore, keep: Callable[[asyncio.Task[None]], object]) -> LeftOutRecorder:
    """Each message a full outbox leaves out, written to the audit log by a task ``keep`` holds (serve's: cancelled
    and awaited before the store closes, its failure logged)."""
    async def write(left: LeftOut) -> None:
        await bot_log(audit).slack_left_out(left.channel, left.thread_ts, left.text)

    def record(left: LeftOut) -> None:
        keep(asyncio.create_task(write(left), name="slack-left-out"))
    return record


async def _start(app: AsyncApp, context: BotContext, app_token: str | None, http_port: int | None,
                 bind: str) -> Callable[[], Awaitable[None]]:
    """Check the bot token with Slack, tell interrupted threads, then listen; returns how to stop."""
    try:
        await app.client.auth_test()
    except SlackApiError as exc:
        raise UsageError(f"Slack refused SLACK_BOT_TOKEN: {exc.response.get('error')}",
                         hint="copy the Bot User OAuth Token (xoxb-…) of the installed app") from None
    interrupted = await recover_in_slack(context, app.client)
    if http_port is not None:
        runner = web.AppRunner(app.web_app(path="/slack/events"))
        await runner.setup()
        await web.TCPSite(runner, bind, http_port).start()
        logging.info("proofbot listening on %s:%d/slack/events (%d interrupted operation(s) reported)",
                     bind, http_port, len(interrupted))
        return runner.cleanup
    handler = AsyncSocketModeHandler(app, app_token, web_client=app.client)
    await handler.connect_async()  # type: ignore[no-untyped-call]

    async def close() -> None:
        await handler.close_async()  # type: ignore[no-untyped-call]
    return close


async def _drain(listeners: set[asyncio.Task[Any]], deadline_s: float) -> None:
    """Wait up to ``deadline_s`` for the listeners in flight, then cancel the rest (awaited): none of them ever
    writes to a closed store. A cancelled operation is told interrupted in its thread by the next serve."""
    running = set(listeners)
    if not running:
        return
    logging.info("proofbot stopping: waiting up to %g s for %d request(s) in flight", deadline_s, len(running))
    _, late = await asyncio.wait(running, timeout=deadline_s)
    if late:
        logging.warning("%d request(s) still running after %g s: cancelled; the next serve tells their threads "
                        "they were interrupted", len(late), deadline_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)


async def _unless_stopped(stop: asyncio.Event, starting: Awaitable[T]) -> T | None:
    """starting's result, or None when a stop signal came first (starting is then cancelled)."""
    task = asyncio.ensure_future(starting)
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None
