"""The one way proofbot writes a time: UTC, ISO 8601 to the millisecond, with a ``Z`` (audit events,
plans, locks, what a host reported)."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    return utc_at(datetime.now(UTC).timestamp())


def utc_at(epoch: float) -> str:
    """``epoch`` (seconds) as proofbot writes times."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
