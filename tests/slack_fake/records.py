"""What the fake Slack records and serves with: its constants, the records of each call, message, file,
ack and view, and the errors it answers with (the Web API's `{"ok": false, "error": …}`)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

JSON = dict[str, Any]
TokenType = Literal["bot", "app"]

MANIFEST = Path(__file__).resolve().parents[2] / "manifest.yml"
BOT_USER_ID = "UBOT"
BOT_USER_NAME = "proofbot"
BOT_ID = "B0TEST"
TEAM_NAME = "Fake Team"
PERMALINK_BASE = "https://fake.slack.test"
SIGNING_SECRET = "fake-signing-secret"
MAX_MESSAGE_TEXT = 40_000
ACK_DEADLINE_SECONDS = 3.0
RESPONSE_URL_MAX_USES = 5
RESPONSE_URL_LIFETIME_SECONDS = 30 * 60
FIRST_TS_SECONDS = 1_700_000_000
DEFAULT_APP_SCOPES: tuple[str, ...] = ("connections:write",)
TRIGGER_LIFETIME_SECONDS = 3.0
# The bot scope an Events API event needs besides the subscription (public channels here).
EVENT_SCOPES = {"member_joined_channel": "channels:read", "app_home_opened": None}

CHANNEL_ID_RE = re.compile(r"^[CG][A-Z0-9]+$")
USER_ID_RE = re.compile(r"^[UW][A-Z0-9]+$")


def manifest_bot_events(path: Path = MANIFEST) -> tuple[str, ...]:
    """The Events API events `manifest.yml` subscribes the bot to: all Slack will send it."""
    manifest = yaml.safe_load(path.read_text())
    return tuple((manifest.get("settings", {}).get("event_subscriptions") or {}).get("bot_events") or ())


def manifest_bot_scopes(path: Path = MANIFEST) -> tuple[str, ...]:
    """The bot scopes `manifest.yml` requests: all the installed app is granted."""
    manifest = yaml.safe_load(path.read_text())
    return tuple(manifest["oauth_config"]["scopes"]["bot"])


class SlackError(Exception):
    """An API error: becomes `{"ok": false, "error": code, **extra}` with the given HTTP status."""

    def __init__(
        self,
        error: str,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.headers = dict(headers or {})
        self.extra = extra

    def body(self) -> JSON:
        return {"ok": False, "error": self.error, **self.extra}


def _invalid_arguments(*missing: str) -> SlackError:
    return SlackError(
        "invalid_arguments",
        response_metadata={"messages": [f"[ERROR] missing required field: {m}" for m in missing]},
    )


@dataclass
class Call:
    """One Web API request as the fake received it (token removed from `args`)."""

    method: str
    args: JSON
    at: float
    token: str | None = None
    http_status: int = 200
    response: JSON = field(default_factory=dict)
    connection: int = 0  # which TCP connection it came over: 1 the first the fake accepted, 2 the next…

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        err = self.response.get("error")
        return err if isinstance(err, str) else None


@dataclass
class MessageEdit:
    """One accepted chat.update of a message."""

    text: str
    blocks: list[JSON] | None
    at: float


@dataclass
class Message:
    """A message posted by the bot into a channel (or thread)."""

    channel: str
    ts: str
    text: str
    blocks: list[JSON] | None
    thread_ts: str | None
    posted_at: float
    edits: list[MessageEdit] = field(default_factory=list)
    metadata: JSON | None = None  # chat.postMessage's `metadata` (event_type, event_payload), as history returns it
    # When it was posted (time.time()): what Slack's ts is; the fake's ts count from a fixed start instead, so
    # conversations.history's oldest/latest are compared with this.
    posted_epoch: float = 0.0

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts

    @property
    def update_times(self) -> list[float]:
        return [e.at for e in self.edits]

    def as_dict(self) -> JSON:
        d: JSON = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": self.text,
                   "ts": self.ts}
        if self.blocks is not None:
            d["blocks"] = self.blocks
        if self.thread_ts is not None:
            d["thread_ts"] = self.thread_ts
        if self.metadata is not None:
            d["metadata"] = self.metadata
        return d


@dataclass
class Ephemeral:
    """A chat.postEphemeral message (not addressable by chat.update / getPermalink)."""

    channel: str
    user: str
    message_ts: str
    text: str
    blocks: list[JSON] | None
    at: float


@dataclass
class UploadedFile:
    """A file going through files.getUploadURLExternal -> upload -> completeUploadExternal."""

    id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    completed: bool = False
    channels: list[str] = field(default_factory=list)
    thread_ts: str | None = None

    def as_dict(self) -> JSON:
        return {"id": self.id, "name": self.filename, "title": self.title or self.filename,
                "size": len(self.content or b""), "user": BOT_USER_ID, "channels": list(self.channels)}


@dataclass
class SocketAck:
    """The acknowledgement a Socket Mode client sent back for one envelope."""

    envelope_id: str
    payload: JSON | None
    elapsed: float


@dataclass
class HttpAck:
    """The app's HTTP answer to a request `FakeSlack.deliver` POSTed to its Request URL."""

    url: str
    kind: str  # "slash_commands" or the interaction type ("block_actions", ...)
    status_code: int
    text: str
    content_type: str
    elapsed: float

    def json(self) -> Any:
        return json.loads(self.text)


@dataclass
class ResponsePost:
    """One POST to a minted response_url."""

    url: str
    body: JSON
    at: float
    status: int
    error: str | None = None


@dataclass
class OpenView:
    """A modal opened with views.open: its view as sent, whose it is, and what became of it."""

    id: str
    user: str
    view: JSON
    opened_at: float
    closed: bool = False
    acks: list[JSON] = field(default_factory=list)  # each submission's ack body ({} when none)


@dataclass
class HomePublish:
    """One accepted views.publish of a user's App Home."""

    user: str
    view: JSON
    at: float


@dataclass
class Channel:
    """A conversation in the fake workspace; `is_member`: the bot was invited to it; `members`: the
    people in it (added with `join`, or by sending a slash command there: Slack only lets people type
    in a channel they are in)."""

    id: str
    name: str
    is_private: bool = False
    is_archived: bool = False
    is_member: bool = True
    members: set[str] = field(default_factory=set)  # people in it (the bot too when `is_member`)


class PendingAck:
    """An envelope pushed over Socket Mode; `await` it (or `.wait(timeout)`) for the SocketAck."""

    def __init__(self, envelope: JSON, sent_at: float, future: asyncio.Future[SocketAck]) -> None:
        self.envelope = envelope
        self.sent_at = sent_at
        self._future = future

    @property
    def envelope_id(self) -> str:
        return str(self.envelope["envelope_id"])

    def done(self) -> bool:
        return self._future.done()

    async def wait(self, timeout: float = 10.0) -> SocketAck:  # noqa: ASYNC109
        try:
            return await asyncio.wait_for(asyncio.shield(self._future), timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no ack for {self.envelope['type']} envelope {self.envelope_id} "
                f"within {timeout}s"
            ) from None

    def __await__(self) -> Generator[Any, None, SocketAck]:
        return self.wait().__await__()


@dataclass
class _Content:
    text: str
    blocks: list[JSON] | None
    missing_fallback: bool


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    s = value if isinstance(value, str) else str(value)
    return s or None


def _json_value(value: Any, error: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise SlackError(error) from None
    return value
