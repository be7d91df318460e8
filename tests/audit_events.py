"""Realistic audit events for tests: operations written through the typed writers (commands/store/log.py)
as proofbot writes them, and ``raw_append`` for the tests that need an event proofbot would not write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from commands.findings import Evidence, Finding
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.events import Event, append_event
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.vocabulary import CheckStatus, EventKind, Verdict

if TYPE_CHECKING:
    import sqlite_utils

CHECKS = ("file:spec_info.py", "extra-files", "main-pid", "health", "cmdline", "stale-process")


async def raw_append(store: AuditStore, kind: str, *, operation_id: str | None = None, operation: str | None = None,
                     host: str | None = None, actor: str | None = None,
                     details: dict[str, Any] | None = None) -> Event:
    """One event of any kind and shape through the store's primitive: for tests of the chain and of readers
    given rows proofbot never writes (an old shape, a hand edit)."""
    return await store.write(lambda db: append_event(db, kind, operation_id=operation_id, operation=operation,
                                                     host=host, actor=actor, details=details))


async def record_operation(store: AuditStore, operation_id: str, *, operation: str = "verify", host: str = "ct129",
                           origin: Origin, verdict: str | None = "pass", decision: str | None = None,
                           decided_by: str | None = None, checks: tuple[str, ...] = CHECKS) -> None:
    """requested → [plan decision] → one check per name → finished (verdict None: still running)."""
    log = audit_log(store, operation, operation_id, host, origin.actor)
    await log.requested(origin, checks=list(checks))
    if decision is not None:
        decider = audit_log(store, operation, operation_id, host, decided_by or "proofbot")

        def decide(db: sqlite_utils.Database) -> Event:
            within = decider.within(db)
            if decision == EventKind.EXPIRED:
                return within.expired("2026-05-22T10:00:00.000Z")
            write = within.approved if decision == EventKind.APPROVED else within.rejected
            return write("abc123", origin.actor)

        await store.write(decide)
        if decision != "approved":
            return
    for name in checks:
        status = CheckStatus.PASS if verdict == "pass" or name != "cmdline" else CheckStatus.FAIL
        await log.check(Finding(name, status, f"{name} {status}", Evidence("true", 0, "", 0.01)))
    if verdict is not None:
        await log.finished(Finished(Verdict(verdict), duration_s=1.2))


def cli_origin(user: str = "root@ops1") -> Origin:
    return Origin(actor=user, via="cli")


def slack_origin(user: str, channel: str, thread_ts: str) -> Origin:
    return Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=thread_ts)
