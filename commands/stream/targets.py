"""Where the stream delivers: an HTTP(S) webhook (a JSON batch per POST; any 2xx acknowledges it) and RFC 5424
syslog over TCP with octet counting (RFC 6587). Each ``send`` is bounded by a timeout and either delivers the
whole batch or raises ``DeliveryFailed``; what the receiver said is capped and redacted before anyone sees it.

Why TCP for syslog, not UDP: UDP drops silently (a full buffer, an MTU above 1,500 bytes for a big event) and
an event lost that way is a gap nobody sees; TCP delivers in order or fails where the stream can see it and
retry. Syslog has no acknowledgement of its own: a batch counts as delivered once written and drained to the
kernel, so a receiver that dies holding unread bytes loses them; the webhook is the acknowledged target.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
from typing import Any, Protocol

import httpx

from commands.errors import UsageError
from commands.redact import redact

SEND_TIMEOUT_S = 10.0
REASON_CHARS = 200
# RFC 5424: facility 13 (log audit) * 8 + severity 6 (informational).
PRI = 13 * 8 + 6
# RFC 5612's enterprise number for documentation: the SD-ID of proofbot's structured data.
SD_ID = "proofbot@32473"
_PRINTABLE = re.compile(r"^[\x21-\x7e]{1,255}$")


class DeliveryFailed(Exception):
    """The target did not take the batch: the stream keeps its cursor and tries again after a pause."""


class Target(Protocol):
    name: str  # the cursor's key in the state file, and how logs name it (credentials masked)

    async def send(self, events: list[dict[str, Any]]) -> None: ...

    async def close(self) -> None: ...


def body_of(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"events": events}, ensure_ascii=False, separators=(",", ":")).encode()


AUTHORIZATION_ENV = "PROOFBOT_STREAM_AUTHORIZATION"  # the whole header value: `Bearer …`, `Splunk …`


class HttpTarget:
    """The webhook; ``authorization`` (from the environment, never the command line, which any local user can
    read in /proc) is sent as the ``Authorization`` header."""

    def __init__(self, url: str, timeout_s: float = SEND_TIMEOUT_S, authorization: str | None = None) -> None:
        parsed = httpx.URL(url) if url.startswith(("http://", "https://")) else None
        if parsed is None or not parsed.host:
            raise UsageError(f"--to {redact(url)!r} is not an http:// or https:// URL",
                             hint="the receiver's webhook URL, e.g. https://siem.example/proofbot")
        self.url = url
        self.name = url
        self._headers = {"Content-Type": "application/json"}
        if authorization:
            self._headers["Authorization"] = authorization
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), follow_redirects=False,
                                         trust_env=False)

    async def send(self, events: list[dict[str, Any]]) -> None:
        request = self._client.build_request("POST", self.url, content=body_of(events), headers=self._headers)
        try:
            response = await self._client.send(request, stream=True)  # the answer's body is never read whole
            await response.aclose()
        except httpx.HTTPError as exc:
            raise DeliveryFailed(redact(f"{type(exc).__name__}: {exc}")[:REASON_CHARS]) from None
        if not 200 <= response.status_code < 300:
            raise DeliveryFailed(f"HTTP {response.status_code}")

    async def close(self) -> None:
        await self._client.aclose()


def syslog_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT``."""
    host, _, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--syslog {text!r} is not HOST:PORT", hint="e.g. --syslog siem.example:6514")
    return host, int(port)


def syslog_frame(event: dict[str, Any], hostname: str, procid: int) -> bytes:
    """One RFC 5424 message, octet-counted (RFC 6587 3.4.1): ``LEN SP MSG``; MSG's text is the event's JSON.

    The header's fields come from the log, which a hand-edited database may fill with anything: each is the
    event's value only when it is what RFC 5424 allows there, else its NILVALUE ``-``; SD values are escaped."""
    params = " ".join(f'{name}="{_sd_value(event[name])}"' for name in ("seq", "hash", "prev_hash"))
    at, kind = _field(event["at"], 64, _TIMESTAMP), _field(event["kind"], 32)
    header = f"<{PRI}>1 {at} {hostname} proofbot {procid} {kind} [{SD_ID} {params}] "
    message = header.encode() + b"\xef\xbb\xbf" + json.dumps(event, ensure_ascii=False).encode()
    return f"{len(message)} ".encode() + message


_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)$")


def _field(value: Any, limit: int, shape: re.Pattern[str] = _PRINTABLE) -> str:
    text = str(value)
    return text if len(text) <= limit and _PRINTABLE.match(text) and shape.match(text) else "-"


def _sd_value(value: Any) -> str:
    """An SD-PARAM value: ``"``, ``\\`` and ``]`` escaped with a backslash (RFC 5424 6.3.3)."""
    return re.sub(r'(["\\\]])', r"\\\1", str(value))


class SyslogTarget:
    def __init__(self, address: str, timeout_s: float = SEND_TIMEOUT_S) -> None:
        self.host, self.port = syslog_address(address)
        self.name = f"syslog://{address}"
        self.timeout_s = timeout_s
        name = socket.gethostname()
        self.hostname = name if _PRINTABLE.match(name) else "-"  # RFC 5424's NILVALUE
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def send(self, events: list[dict[str, Any]]) -> None:
        data = b"".join(syslog_frame(event, self.hostname, os.getpid()) for event in events)
        try:
            if self._reader is not None and self._reader.at_eof():
                await self.close()  # the receiver hung up since the last batch: never write into a dead socket
            writer = self._writer
            if writer is None:
                reader, opened = await asyncio.wait_for(asyncio.open_connection(self.host, self.port),
                                                        self.timeout_s)
                self._reader, self._writer, writer = reader, opened, opened
            writer.write(data)
            await asyncio.wait_for(writer.drain(), self.timeout_s)
        except (OSError, TimeoutError) as exc:
            await self.close()
            raise DeliveryFailed(f"{type(exc).__name__}: {exc}"[:REASON_CHARS]) from None

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), self.timeout_s)
            except (OSError, TimeoutError):
                pass
