"""``serve --metrics-port``: Prometheus metrics in a registry of serve's own, fed by the core's observer seam
(commands/observe.py) and by the Slack client, served as text at ``/metrics`` on the serve's event loop.

No label names a host, a user or a file (cardinality): operations by operation and verdict, approvals by
decision, check durations by the check's family (``file``, ``package``, ``health``…), Slack errors by method
and Slack's error word, SSH failures by the error's class. docs/observability.md lists every metric.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from commands import observe
from commands.errors import UsageError
from commands.store.db import AuditStore
from commands.store.events import Event
from commands.stream.reader import chain_length
from commands.vocabulary import EventKind

DEFAULT_ADDRESS = "127.0.0.1"
DECISIONS = frozenset({EventKind.APPROVED, EventKind.REJECTED, EventKind.EXPIRED})  # the label: the kind's word
CHAIN_READ_TIMEOUT_S = 5.0  # a scrape never waits longer on the store (Prometheus' own timeout is 10 s)
# From a health read (ms) to a slow package's RECORD (tens of seconds).
CHECK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    """One serve's metrics; an ``observe.Observer`` (every method is quick, thread-safe and never raises)."""

    def __init__(self, in_flight: Callable[[], int] = lambda: 0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.operations = Counter("proofbot_operations", "Operations ended (`finished` audit events), by "
                                  "operation and verdict", ["operation", "verdict"], registry=r)
        self.approvals = Counter("proofbot_approvals", "Plan decisions: approved, rejected, expired",
                                 ["decision"], registry=r)
        self.events = Counter("proofbot_audit_events", "Audit events this process appended, by kind", ["kind"],
                              registry=r)
        self.checks = Histogram("proofbot_check_duration_seconds", "Each check's own command time on the host, "
                                "by the check's family (file, package, health…)", ["check"], registry=r,
                                buckets=CHECK_BUCKETS)
        self.ssh_connects = Counter("proofbot_ssh_connects", "SSH connections attempted", registry=r)
        self.ssh_failures = Counter("proofbot_ssh_connect_failures", "SSH connections that failed, by the error "
                                    "(HostKeyNotVerified, HostUnreachable…)", ["error"], registry=r)
        self.slack_errors = Counter("proofbot_slack_api_errors", "Slack Web API calls that failed, by method and "
                                    "Slack's error", ["method", "error"], registry=r)
        self.slack_429 = Counter("proofbot_slack_rate_limited", "HTTP 429 answers from the Slack Web API (each "
                                 "one, retried or not)", registry=r)
        self.leases = Counter("proofbot_lease_takeovers", "Operations taken over from a replica whose lease "
                              "expired: each one interrupted (a rollout and its host under way count one each) "
                              "and each pending plan adopted", registry=r)
        self.in_flight = Gauge("proofbot_operations_in_flight", "Slack-started operations running now",
                               registry=r)
        self.in_flight.set_function(lambda: float(in_flight()))
        self.chain = Gauge("proofbot_audit_chain_events", "Events in the audit log's hash chain (read at scrape)",
                           registry=r)

    # the observer seam (commands/observe.py); appended runs in the store's worker thread
    def appended(self, event: Event) -> None:
        kind = event.kind
        self.events.labels(kind).inc()
        if kind == EventKind.FINISHED:
            self.operations.labels(event.operation or "none", str(event.details.get("verdict"))).inc()
        elif kind in DECISIONS:
            self.approvals.labels(str(kind)).inc()
        elif kind == EventKind.CHECK:
            evidence = event.details.get("evidence")
            seconds = evidence.get("duration_s") if isinstance(evidence, dict) else None
            if isinstance(seconds, int | float):  # a check that ran no command has no time of its own
                self.checks.labels(check_family(str(event.details.get("name", "")))).observe(float(seconds))

    def ssh_connected(self, error: str | None) -> None:
        self.ssh_connects.inc()
        if error is not None:
            self.ssh_failures.labels(error).inc()

    def lease_taken_over(self) -> None:
        self.leases.inc()

    # the Slack client's (bot/slack/redacting.py, RateLimitCounting below)
    def slack_failed(self, method: str, error: str) -> None:
        self.slack_errors.labels(method, error).inc()

    def slack_rate_limited(self) -> None:
        self.slack_429.inc()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Metrics]:
        """These metrics hear the core and the Slack client for the block."""
        global _installed
        _installed = (*_installed, self)
        try:
            with observe.observing(self):
                yield self
        finally:
            _installed = tuple(m for m in _installed if m is not self)

    async def scrape(self, audit: AuditStore) -> bytes:
        """The text format, with the chain length read now (left as it was if the store does not answer)."""
        try:
            self.chain.set(await asyncio.wait_for(chain_length(audit), CHAIN_READ_TIMEOUT_S))
        except Exception as exc:  # the scrape still answers: every other metric is in memory
            logging.getLogger(__name__).warning("metrics: could not read the audit chain's length: %s", exc)
        return generate_latest(self.registry)


def check_family(name: str) -> str:
    """``file:spec_info.py`` → ``file``, ``package:deb:x`` → ``package``: a bounded label."""
    return name.split(":", 1)[0] or "unnamed"


_installed: tuple[Metrics, ...] = ()


def slack_failed(method: str, error: str) -> None:
    for metrics in _installed:
        metrics.slack_failed(method, error)


class RateLimitCounting(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 retry, counting every 429 it sees (the last one too, which it does not retry)."""

    async def can_retry_async(self, *, state: RetryState, request: HttpRequest,
                              response: HttpResponse | None = None, error: Exception | None = None) -> bool:
        if response is not None and response.status_code == 429:
            for metrics in _installed:
                metrics.slack_rate_limited()
        return await super().can_retry_async(state=state, request=request, response=response, error=error)


async def start_metrics_server(metrics: Metrics, audit: AuditStore, address: str,
                               port: int) -> tuple[Callable[[], Awaitable[None]], int]:
    """Serve ``/metrics`` on address:port (0: any free port); returns how to stop it and the port bound."""

    async def handle(_: web.Request) -> web.Response:
        body = await metrics.scrape(audit)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, address, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise UsageError(f"cannot serve metrics on {address}:{port}: {exc.strerror or exc}",
                         hint="pass another --metrics-port (or --metrics-address)") from None
    server: Any = site._server  # aiohttp keeps the bound sockets there; the port is needed when 0 was asked
    bound = int(server.sockets[0].getsockname()[1]) if server and server.sockets else port
    return runner.cleanup, bound

