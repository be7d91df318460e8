"""proofbot's log lines: human text by default, one JSON object per line with ``PROOFBOT_LOG_FORMAT=json``;
each names the operation and host its task works on (commands/observe.py), and every line, message and
traceback alike, passes the redaction layer (commands/redact.py) in either format."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, TextIO

from commands import observe
from commands.clock import utc_at
from commands.errors import UsageError
from commands.redact import redact

FORMAT_ENV = "PROOFBOT_LOG_FORMAT"
FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Context(logging.Filter):
    """Puts the task's operation id and host on each record (None outside an operation)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.operation_id = observe.OPERATION_ID.get()
        record.host = observe.HOST.get()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        operation_id = getattr(record, "operation_id", None)
        if operation_id:
            host = getattr(record, "host", None)
            line += f" [operation {operation_id}{f' on {host}' if host else ''}]"
        return redact(line)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": utc_at(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": redact(record.getMessage()),
            "operation_id": getattr(record, "operation_id", None),
            "host": getattr(record, "host", None),
        }
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


def log_format() -> str:
    chosen = os.environ.get(FORMAT_ENV, "text").strip().lower() or "text"
    if chosen not in FORMATS:
        raise UsageError(f"{FORMAT_ENV}={chosen!r} is not a log format", hint=f"use one of: {', '.join(FORMATS)}")
    return chosen


def configure_logging(level: int = logging.INFO, stream: TextIO | None = None) -> logging.Handler:
    """One handler on the root logger (replacing any before it), in the format ``PROOFBOT_LOG_FORMAT`` names."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format() == "json" else TextFormatter())
    handler.addFilter(_Context())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # asyncssh says ~25 INFO lines per verified host (each channel opened, each exit status), each one formatted
    # and redacted on the event loop: at 50 verifies at once that CPU held Slack acks; its warnings still show.
    logging.getLogger("asyncssh").setLevel(max(level, logging.WARNING))
    return handler
