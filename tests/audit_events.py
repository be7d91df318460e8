"""Realistic audit events for tests: operations written through AuditStore.append as proofbot writes them."""

from __future__ import annotations

from commands.operation import Origin
from commands.store.events import AuditStore

CHECKS = ("file:spec_info.py", "extra-files", "main-pid", "health", "cmdline", "stale-process")


async def record_operation(store: AuditStore, operation_id: str, *, operation: str = "verify", host: str = "ct129",
                           origin: Origin, verdict: str | None = "pass", decision: str | None = None,
                           decided_by: str | None = None, checks: tuple[str, ...] = CHECKS) -> None:
    """requested → [plan decision] → one check per name → finished (verdict None: still running)."""
    common = {"operation_id": operation_id, "operation": operation, "host": host}
    await store.append("requested", **common, actor=origin.actor,
                       details={"checks": list(checks), "origin": origin.to_json()})
    if decision is not None:
        await store.append(decision, **common, actor=decided_by or "proofbot",
                           details={"plan_hash": "abc123", "requested_by": origin.actor})
        if decision != "approved":
            return
    for name in checks:
        status = "pass" if verdict == "pass" or name != "cmdline" else "fail"
        await store.append("check", **common, actor=origin.actor,
                           details={"name": name, "status": status, "summary": f"{name} {status}",
                                    "evidence": {"command": "true", "exit_status": 0, "output": "",
                                                 "duration_s": 0.01}})
    if verdict is not None:
        await store.append("finished", **common, actor=origin.actor,
                           details={"verdict": verdict, "duration_s": 1.2})


def cli_origin(user: str = "root@ops1") -> Origin:
    return Origin(actor=user, via="cli")


def slack_origin(user: str, channel: str, thread_ts: str) -> Origin:
    return Origin(actor=f"slack:{user}", via="slack", channel=channel, thread_ts=thread_ts)
