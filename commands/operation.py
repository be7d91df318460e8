"""What every operation returns and who asked for it: the shared result shape of README's `--json`."""

from __future__ import annotations

import getpass
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from commands.findings import Finding
from commands.holder import Holder
from commands.redact import redact_data
from commands.vocabulary import Operation, Verdict

OnFinding = Callable[[Finding], Awaitable[None]]


class Origin(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    """Who asked, through which front-end, and where the story is told (Slack thread)."""

    actor: str
    via: Literal["cli", "slack", "demo"]
    channel: str | None = None
    thread_ts: str | None = None

    @classmethod
    def local_user(cls, via: Literal["cli", "demo"] = "cli") -> Origin:
        return cls(actor=f"{getpass.getuser()}@{socket.gethostname()}", via=via)

    def to_json(self) -> dict[str, Any]:
        """As recorded with a request, with the process that runs it (so a restarted bot can tell
        an operation still running elsewhere from one whose process died)."""
        return {"actor": self.actor, "via": self.via, "channel": self.channel, "thread_ts": self.thread_ts,
                "process": Holder.current().to_json()}


def new_operation_id() -> str:
    return f"op-{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"


@dataclass
class OperationResult:
    operation_id: str
    operation: Operation | str
    host: str
    started_at: str
    duration_s: float
    checks: list[Finding]
    extra: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        return Verdict.of_statuses(finding.status for finding in self.checks)

    def to_json(self) -> dict[str, Any]:
        """README's host object, redacted: each finding by its own ``to_json`` (which redacts it whole), the rest
        here, so no part is walked twice (redact_data treats each key of a dict apart: the same text either way)."""
        head = redact_data({
            "host": self.host,
            "operation": self.operation,
            "verdict": self.verdict,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "operation_id": self.operation_id,
        })
        return {**head, "checks": [finding.to_json() for finding in self.checks], **redact_data(self.extra)}
