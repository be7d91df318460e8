"""Strict in-process fake of Slack's Web API, Socket Mode link and response_url endpoints.

It serves only what proofbot uses, and rejects what real Slack rejects, by default: auth and
token type, the bot scopes granted by `manifest.yml`, channels the bot cannot see or is not in,
Block Kit and lengths, Slack's documented rate limits (`limits`: 429 + Retry-After),
chat.postEphemeral to someone not in the channel (`user_not_in_channel`), a response_url past
5 uses or 30 minutes. It also delivers slash commands and clicks to the app (HTTP or Socket
Mode) and judges each ack like Slack: deadline (3 s) and body; an envelope never acked counts
as a late one. What Slack would not show as an API error is recorded in `warnings`, and
leaving the `async with` block with warnings unexamined (not cleared) fails the test.

Where it differs from Slack on purpose:
- Rate limits use each tier's documented floor and, where Slack names no number (the burst of
  chat.postMessage, its workspace-wide cap), a choice of its own: see `limits`.
- Channel membership of people is what the test says (`add_channel(members=)`, `join`), plus
  whoever sends a slash command there (Slack lets one type only where one is a member); a click
  adds no one, since a public channel's messages can be clicked by people who did not join.
- A late or missing ack is a test failure (a warning), where Slack shows the user an error and
  retries Events API deliveries; the fake never retries.
- An envelope never acked is judged when the `async with` block ends (waiting out what is left
  of its 3 s), not at its deadline.
- Message `ts` values count up from a fixed epoch; permalinks use a fake domain.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import parse_qs

import aiohttp
import yaml
from aiohttp import BodyPartReader, WSCloseCode, WSMsgType, web
from aiohttp.web_request import FileField

from .blockkit import validate_blocks, validate_view
from .limits import RateLimits
from .signing import (
    API_APP_ID,
    TEAM_DOMAIN,
    TEAM_ID,
    VERIFICATION_TOKEN,
    block_actions_body,
    sign,
    slash_command_payload,
)

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


class FakeSlack:
    """Fake Slack on 127.0.0.1 (random port): `async with FakeSlack(channels=...) as slack:`.

    Point clients at it with `AsyncWebClient(token=..., base_url=slack.api_url)`.
    """

    def __init__(
        self,
        bot_token: str = "xoxb-test",
        app_token: str = "xapp-test",
        *,
        channels: Mapping[str, str] | None = None,
        scopes: Iterable[str] | None = None,
        app_scopes: Iterable[str] = DEFAULT_APP_SCOPES,
        signing_secret: str = SIGNING_SECRET,
    ) -> None:
        """`channels` maps id -> name of the channels the bot was invited to; no other
        channel exists unless added with `add_channel`. `scopes` default to the manifest's."""
        if not bot_token.startswith("xoxb-"):
            raise ValueError("bot_token must start with xoxb-")
        if not app_token.startswith("xapp-"):
            raise ValueError("app_token must start with xapp-")
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.scopes: set[str] = set(manifest_bot_scopes() if scopes is None else scopes)
        self.app_scopes: set[str] = set(app_scopes)
        self.channels: dict[str, Channel] = {}
        for cid, name in (channels or {}).items():
            self.add_channel(cid, name)

        self.calls: list[Call] = []
        self.warnings: list[str] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.ephemerals: list[Ephemeral] = []
        self.files: dict[str, UploadedFile] = {}
        self.responses: list[ResponsePost] = []
        self.http_acks: list[HttpAck] = []
        self.socket_connects = 0
        self.ack_deadline = ACK_DEADLINE_SECONDS
        self.events: tuple[str, ...] = manifest_bot_events()
        self.views: dict[str, OpenView] = {}
        self.home_publishes: list[HomePublish] = []
        self._triggers: dict[str, tuple[float, str, bool]] = {}  # id -> (minted at, user, used)
        self._submitting: OpenView | None = None

        # method -> (handler, token type, bot scope needed); handlers return the body or raise.
        self._methods: dict[str, tuple[Callable[[JSON], JSON], TokenType, str | None]] = {
            "auth.test": (self._auth_test, "bot", None),
            "chat.postMessage": (self._chat_post_message, "bot", "chat:write"),
            "chat.update": (self._chat_update, "bot", "chat:write"),
            "chat.postEphemeral": (self._chat_post_ephemeral, "bot", "chat:write"),
            "chat.getPermalink": (self._chat_get_permalink, "bot", None),
            "files.getUploadURLExternal": (self._files_get_upload_url, "bot", "files:write"),
            "files.completeUploadExternal": (self._files_complete_upload, "bot", "files:write"),
            "apps.connections.open": (self._apps_connections_open, "app", "connections:write"),
            "views.open": (self._views_open, "bot", None),
            "views.publish": (self._views_publish, "bot", None),
            "conversations.members": (self._conversations_members, "bot", None),  # scope by channel type
        }
        self.rate_limits = RateLimits()
        self._ts_counter = itertools.count(100, 100)
        self._ids = itertools.count(1)
        self._upload_tickets: dict[str, str] = {}
        self._ws_tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._pending: dict[str, PendingAck] = {}
        self._response_urls: dict[str, list[ResponsePost]] = {}
        self._response_url_minted: dict[str, float] = {}
        self._event = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await self._judge_unacked()
        await self.close()
        if exc is None and self.warnings:  # a test that expects one inspects and clears them
            raise AssertionError("fake Slack saw what real Slack would not take:\n" + "\n".join(self.warnings))

    async def start(self) -> None:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/upload/v1/{ticket}", self._handle_upload)
        app.router.add_get("/link/", self._handle_link)
        app.router.add_post("/response/{rid}", self._handle_response)
        app.on_shutdown.append(self._on_shutdown)
        self._runner = web.AppRunner(app, shutdown_timeout=2.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _judge_unacked(self) -> None:
        """An envelope never acked within the deadline is a failure, as an HTTP request would be: Slack
        shows the user a timeout (and retries events). Waits out what is left of each one's deadline."""
        for pending in list(self._pending.values()):
            left = pending.sent_at + self.ack_deadline - time.monotonic()
            if not pending.done() and left > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(pending._future), left)
            if not pending.done():
                self._warn(f"socket mode envelope {pending.envelope_id} ({pending.envelope['type']}) was never "
                           f"acked; Slack would have shown the user a timeout")

    async def close(self) -> None:
        for pending in self._pending.values():
            if not pending.done():
                pending._future.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _on_shutdown(self, app: web.Application) -> None:
        for ws in list(self._sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"fake slack shutting down")

    @property
    def base_url(self) -> str:
        if self._runner is None:
            raise RuntimeError("FakeSlack is not running; use `async with FakeSlack() as slack`")
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """Base URL for `AsyncWebClient(base_url=...)`; ends with `/api/` (urljoin semantics)."""
        return f"{self.base_url}/api/"

    # ------------------------------------------------------------------ configuration
    def add_channel(
        self,
        channel_id: str,
        name: str,
        *,
        is_private: bool = False,
        is_archived: bool = False,
        member: bool = True,
        members: Iterable[str] = (),
    ) -> Channel:
        """A channel of the workspace; `member=False`: one the bot was not invited to; `members`: the
        people in it."""
        if not CHANNEL_ID_RE.match(channel_id):
            raise ValueError(f"not a channel id: {channel_id!r}")
        ch = Channel(channel_id, name, is_private=is_private or channel_id.startswith("G"),
                     is_archived=is_archived, is_member=member, members=set(members))
        self.channels[channel_id] = ch
        return ch

    def join(self, channel_id: str, *users: str) -> None:
        """The people `users` join the channel (chat.postEphemeral reaches only members)."""
        for user in users:
            if not USER_ID_RE.match(user):
                raise ValueError(f"not a user id: {user!r}")
        self.channels[channel_id].members.update(users)

    def set_rate_limit(self, method: str, max_calls: int, per_seconds: float) -> None:
        """Answer HTTP 429 `ratelimited` (with Retry-After) past `max_calls` per window (per channel for
        chat.postMessage), instead of Slack's documented limit (`limits`, on by default)."""
        self.rate_limits.set(method, max_calls, per_seconds)

    # ------------------------------------------------------------------ inspection
    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def message(self, channel: str, ts: str) -> Message:
        return self.messages[(channel, ts)]

    def messages_in(self, channel: str) -> list[Message]:
        return [m for m in self.messages.values() if m.channel == channel]

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """Replies in the thread rooted at `thread_ts` (excluding the parent)."""
        return [
            m
            for m in self.messages.values()
            if m.channel == channel and m.thread_ts == thread_ts and m.ts != thread_ts
        ]

    def responses_to(self, url: str) -> list[ResponsePost]:
        return [r for r in self.responses if r.url == url]

    @property
    def socket_connections(self) -> int:
        return len(self._sockets)

    async def wait_for(
        self, method: str, count: int = 1, timeout: float = 10.0  # noqa: ASYNC109
    ) -> list[Call]:
        """Wait until `method` has been called at least `count` times; returns those calls."""
        await self._wait_until(
            lambda: len(self.calls_to(method)) >= count,
            timeout,
            lambda: f"{count} call(s) to {method} (got {len(self.calls_to(method))})",
        )
        return self.calls_to(method)

    async def wait_for_response(
        self, url: str, count: int = 1, timeout: float = 10.0  # noqa: ASYNC109
    ) -> list[ResponsePost]:
        await self._wait_until(
            lambda: len(self.responses_to(url)) >= count,
            timeout,
            lambda: f"{count} POST(s) to {url} (got {len(self.responses_to(url))})",
        )
        return self.responses_to(url)

    async def wait_for_socket(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        await self._wait_until(
            lambda: bool(self._sockets), timeout, lambda: "a Socket Mode connection"
        )

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self._notify()

    def _notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float = 10.0,  # noqa: ASYNC109
        what: str = "condition",
    ) -> None:
        """Wait until `predicate()` holds; re-checked whenever the fake's state changes."""
        await self._wait_until(predicate, timeout, lambda: what)

    async def _wait_until(
        self, predicate: Callable[[], bool], limit: float, what: Callable[[], str]
    ) -> None:
        try:
            async with asyncio.timeout(limit):
                while True:
                    event = self._event
                    if predicate():
                        return
                    await event.wait()
        except TimeoutError:
            raise TimeoutError(f"timed out after {limit}s waiting for {what()}") from None

    # ------------------------------------------------------------------ minting
    def _next_ts(self) -> str:
        n = next(self._ts_counter)
        return f"{FIRST_TS_SECONDS + n // 1_000_000}.{n % 1_000_000:06d}"

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):08d}"

    def response_url(self, *, age: float = 0.0) -> str:
        """Mint a response_url served by this fake (`age`: as if minted that many seconds ago); POSTs
        are recorded in `responses`. Slack takes RESPONSE_URL_MAX_USES within RESPONSE_URL_LIFETIME_SECONDS."""
        rid = uuid.uuid4().hex
        self._response_urls[rid] = []
        self._response_url_minted[rid] = time.monotonic() - age
        return f"{self.base_url}/response/{rid}"

    def trigger_id(self, user: str) -> str:
        """Mint the trigger_id Slack puts in an interaction: good for one views.open within 3 s."""
        trigger = f"{next(self._ids)}.{TEAM_ID}.{uuid.uuid4().hex}"
        self._triggers[trigger] = (time.monotonic(), user, False)
        return trigger

    def home_of(self, user: str) -> JSON | None:
        """The App Home view last published for `user` (None: never)."""
        views = [p.view for p in self.home_publishes if p.user == user]
        return views[-1] if views else None

    def open_views(self, user: str | None = None) -> list[OpenView]:
        return [v for v in self.views.values() if not v.closed and (user is None or v.user == user)]

    def permalink(self, channel: str, ts: str) -> str:
        msg = self.messages.get((channel, ts))
        link = f"{PERMALINK_BASE}/archives/{channel}/p{ts.replace('.', '')}"
        if msg is not None and msg.is_reply:
            link += f"?thread_ts={msg.thread_ts}&cid={channel}"
        return link

    # ------------------------------------------------------------------ Web API plumbing
    async def _read_args(self, request: web.Request) -> tuple[JSON, str | None]:
        args: JSON = dict(request.query)
        header_token: str | None = None
        auth = request.headers.get("Authorization")
        if auth is not None:
            scheme, _, credentials = auth.partition(" ")
            header_token = credentials.strip() if scheme.lower() == "bearer" else ""
        if request.method == "POST" and request.body_exists:
            ctype = request.content_type
            if ctype == "application/json":
                try:
                    body = json.loads(await request.read())
                except ValueError:
                    raise SlackError("invalid_json") from None
                if not isinstance(body, dict):
                    raise SlackError("invalid_json")
                body.pop("token", None)  # Slack ignores a token inside JSON bodies
                args.update(body)
            elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await request.post()
                for key, value in form.items():
                    args[key] = value.file.read() if isinstance(value, FileField) else value
            else:
                raise SlackError("invalid_post_type")
        body_token = args.pop("token", None)
        token = header_token if header_token is not None else _opt_str(body_token)
        return args, token

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        at = time.monotonic()
        args: JSON = {}
        token: str | None = None
        headers: dict[str, str] = {}
        status = 200
        try:
            args, token = await self._read_args(request)
            body = self._dispatch(method, args, token, at)
            if token == self.bot_token:
                headers["x-oauth-scopes"] = ",".join(sorted(self.scopes))
        except SlackError as e:
            body, status, headers = e.body(), e.status, e.headers
        self.calls.append(Call(method, args, at, token, status, body))
        self._notify()
        return web.json_response(body, status=status, headers=headers)

    def _dispatch(self, method: str, args: JSON, token: str | None, at: float) -> JSON:
        spec = self._methods.get(method)
        if spec is None:
            raise SlackError("unknown_method")
        handler, token_type, scope = spec
        if not token:
            raise SlackError("not_authed")
        if token == self.bot_token:
            kind: TokenType = "bot"
        elif token == self.app_token:
            kind = "app"
        else:
            raise SlackError("invalid_auth")
        if kind != token_type:
            raise SlackError("not_allowed_token_type")
        self._require_scope(scope, self.scopes if kind == "bot" else self.app_scopes)
        self._check_rate_limit(method, args, at)
        return {"ok": True, **handler(args)}

    @staticmethod
    def _require_scope(scope: str | None, granted: set[str]) -> None:
        if scope is not None and scope not in granted:
            raise SlackError("missing_scope", needed=scope, provided=",".join(sorted(granted)))

    def _check_rate_limit(self, method: str, args: JSON, at: float) -> None:
        retry_after = self.rate_limits.retry_after(method, _opt_str(args.get("channel")), at)
        if retry_after is not None:
            raise SlackError("ratelimited", status=429, headers={"Retry-After": str(retry_after)})

    # ------------------------------------------------------------------ validation helpers
    def _visible_channel(self, value: Any, *, error: str = "channel_not_found") -> Channel:
        """A channel the bot can see: any public one, a private one only if invited."""
        ch = self.channels.get(_opt_str(value) or "")
        if ch is None or (ch.is_private and not ch.is_member):
            raise SlackError(error)
        return ch

    def _postable_channel(self, value: Any, *, public_scope: bool = True) -> Channel:
        """Where the bot may post: a channel it is in, or (with chat:write.public, for
        chat.postMessage) any public channel; else `not_in_channel`. Archived: `is_archived`."""
        ch = self._visible_channel(value)
        if not ch.is_member and not (public_scope and "chat:write.public" in self.scopes):
            raise SlackError("not_in_channel")
        if ch.is_archived:
            raise SlackError("is_archived")
        return ch

    def _check_command_source(self, channel_id: str) -> Channel:
        """A test error (not an API one) when Slack could not send this slash command."""
        if "commands" not in self.scopes:
            raise ValueError("Slack sends slash commands only to apps with the commands scope")
        if channel_id not in self.channels:
            raise ValueError(f"no channel {channel_id!r} in the fake workspace; add_channel() it")
        return self.channels[channel_id]

    def _content(self, args: JSON) -> _Content:
        text = _opt_str(args.get("text")) or ""
        blocks_raw = _json_value(args.get("blocks"), "invalid_blocks_format")
        if blocks_raw is not None and not isinstance(blocks_raw, list):
            raise SlackError("invalid_blocks_format")
        blocks: list[JSON] | None = blocks_raw
        if not text and not blocks:
            raise SlackError("no_text")
        if len(text) > MAX_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        if blocks:
            errors = validate_blocks(blocks)
            if errors:
                raise SlackError(
                    "invalid_blocks", errors=errors, response_metadata={"messages": errors}
                )
        return _Content(text, blocks, bool(blocks) and not text.strip())

    def _warn_missing_fallback(self, method: str, content: _Content, where: str) -> None:
        if content.missing_fallback:
            self._warn(
                f"{method} ({where}): blocks without a top-level `text` fallback; Slack uses "
                "it for notifications and screen readers"
            )

    def _thread_root(self, method: str, channel: str, thread_ts: str | None) -> str | None:
        if thread_ts is None:
            return None
        parent = self.messages.get((channel, thread_ts))
        if parent is None:
            self._warn(
                f"{method}: thread_ts={thread_ts} matches no message in {channel}; "
                "Slack would not show it under the intended thread"
            )
            return thread_ts
        if parent.is_reply:
            self._warn(
                f"{method}: thread_ts={thread_ts} is itself a reply; use its parent's ts "
                f"({parent.thread_ts})"
            )
            return parent.thread_ts
        return thread_ts

    # ------------------------------------------------------------------ Web API methods
    def _auth_test(self, args: JSON) -> JSON:
        return {
            "url": f"{PERMALINK_BASE}/",
            "team": TEAM_NAME,
            "user": BOT_USER_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _chat_post_message(self, args: JSON) -> JSON:
        channel = self._postable_channel(args.get("channel")).id
        content = self._content(args)
        thread_ts = self._thread_root("chat.postMessage", channel, _opt_str(args.get("thread_ts")))
        ts = self._next_ts()
        msg = Message(channel, ts, content.text, content.blocks, thread_ts, time.monotonic())
        self.messages[(channel, ts)] = msg
        self._warn_missing_fallback("chat.postMessage", content, f"{channel}/{ts}")
        return {"channel": channel, "ts": ts, "message": msg.as_dict()}

    def _existing_message(self, args: JSON, ts_arg: str) -> Message:
        channel = self._visible_channel(args.get("channel")).id
        ts = _opt_str(args.get(ts_arg))
        if ts is None:
            raise _invalid_arguments(ts_arg)
        msg = self.messages.get((channel, ts))
        if msg is None:
            raise SlackError("message_not_found")
        return msg

    def _chat_update(self, args: JSON) -> JSON:
        msg = self._existing_message(args, "ts")
        if self.channels[msg.channel].is_archived:
            raise SlackError("is_archived")
        content = self._content(args)
        msg.text = content.text
        if content.blocks is not None:
            msg.blocks = content.blocks
        msg.edits.append(MessageEdit(content.text, content.blocks, time.monotonic()))
        self._warn_missing_fallback("chat.update", content, f"{msg.channel}/{msg.ts}")
        return {"channel": msg.channel, "ts": msg.ts, "text": msg.text, "message": msg.as_dict()}

    def _chat_post_ephemeral(self, args: JSON) -> JSON:
        channel = self._postable_channel(args.get("channel"), public_scope=False).id
        user = _opt_str(args.get("user"))
        if user is None:
            raise _invalid_arguments("user")
        if user not in self.channels[channel].members:
            raise SlackError("user_not_in_channel")
        content = self._content(args)
        ts = self._next_ts()
        self.ephemerals.append(
            Ephemeral(channel, user, ts, content.text, content.blocks, time.monotonic())
        )
        self._warn_missing_fallback("chat.postEphemeral", content, f"{channel}/{user}")
        return {"message_ts": ts}

    def _chat_get_permalink(self, args: JSON) -> JSON:
        msg = self._existing_message(args, "message_ts")
        return {"channel": msg.channel, "permalink": self.permalink(msg.channel, msg.ts)}

    def _files_get_upload_url(self, args: JSON) -> JSON:
        filename = _opt_str(args.get("filename"))
        length_raw = args.get("length")
        missing = [n for n, v in (("filename", filename), ("length", length_raw)) if v is None]
        if missing:
            raise _invalid_arguments(*missing)
        try:
            length = int(length_raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise SlackError("invalid_arguments") from None
        if length < 0:
            raise SlackError("invalid_arguments")
        file_id = self._next_id("F")
        ticket = uuid.uuid4().hex
        assert filename is not None
        self.files[file_id] = UploadedFile(id=file_id, filename=filename, length=length)
        self._upload_tickets[ticket] = file_id
        return {"upload_url": f"{self.base_url}/upload/v1/{ticket}", "file_id": file_id}

    def _files_complete_upload(self, args: JSON) -> JSON:
        items = _json_value(args.get("files"), "invalid_arguments")
        if not isinstance(items, list) or not items:
            raise _invalid_arguments("files")
        channels: list[str] = []
        if _opt_str(args.get("channel_id")) is not None:
            # chat:write.public is about messages: sharing a file needs the bot in the channel.
            channels.append(self._postable_channel(args["channel_id"], public_scope=False).id)
        thread_ts = _opt_str(args.get("thread_ts"))
        if thread_ts is not None:
            if len(channels) != 1:
                raise SlackError("invalid_arguments")
            thread_ts = self._thread_root("files.completeUploadExternal", channels[0], thread_ts)
        uploads: list[UploadedFile] = []
        for item in items:
            file_id = item.get("id") if isinstance(item, dict) else None
            upload = self.files.get(file_id) if isinstance(file_id, str) else None
            if upload is None or upload.content is None or upload.completed:
                raise SlackError("file_not_found")
            uploads.append(upload)
        for item, upload in zip(items, uploads, strict=True):
            upload.completed = True
            upload.title = _opt_str(item.get("title")) or upload.filename
            upload.channels = list(channels)
            upload.thread_ts = thread_ts
        return {"files": [u.as_dict() for u in uploads]}

    def _views_open(self, args: JSON) -> JSON:
        trigger = _opt_str(args.get("trigger_id"))
        if trigger is None:
            raise _invalid_arguments("trigger_id")
        minted = self._triggers.get(trigger)
        if minted is None:
            raise SlackError("invalid_trigger_id")
        at, user, used = minted
        if used:
            raise SlackError("exchanged_trigger_id")
        if time.monotonic() - at > TRIGGER_LIFETIME_SECONDS:
            raise SlackError("expired_trigger_id")
        view = _json_value(args.get("view"), "invalid_arguments")
        errors = validate_view(view, "modal")
        if errors:
            raise SlackError("invalid_arguments", response_metadata={"messages": errors})
        self._triggers[trigger] = (at, user, True)
        view_id = self._next_id("V")
        self.views[view_id] = OpenView(view_id, user, view, time.monotonic())
        return {"view": {**view, "id": view_id, "team_id": TEAM_ID, "app_id": API_APP_ID, "bot_id": BOT_ID}}

    def _conversations_members(self, args: JSON) -> JSON:
        """Paged like Slack's (``limit`` 1..1000, ``next_cursor``); channels:read or groups:read by its type."""
        ch = self._visible_channel(args.get("channel"))
        self._require_scope("groups:read" if ch.is_private else "channels:read", self.scopes)
        members = sorted(ch.members | ({BOT_USER_ID} if ch.is_member else set()))
        limit = int(args.get("limit") or 100)
        if not 1 <= limit <= 1000:
            raise SlackError("invalid_limit")
        start = int(_opt_str(args.get("cursor")) or 0)
        end = start + limit
        return {"members": members[start:end],
                "response_metadata": {"next_cursor": str(end) if end < len(members) else ""}}

    def _views_publish(self, args: JSON) -> JSON:
        user = _opt_str(args.get("user_id"))
        if user is None:
            raise _invalid_arguments("user_id")
        if not USER_ID_RE.match(user):
            raise SlackError("invalid_arguments")
        view = _json_value(args.get("view"), "invalid_arguments")
        errors = validate_view(view, "home")
        if errors:
            raise SlackError("invalid_arguments", response_metadata={"messages": errors})
        self.home_publishes.append(HomePublish(user, view, time.monotonic()))
        return {"view": {**view, "id": self._next_id("V"), "team_id": TEAM_ID, "app_id": API_APP_ID}}

    def _apps_connections_open(self, args: JSON) -> JSON:
        ticket = uuid.uuid4().hex
        self._ws_tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={API_APP_ID}"}

    # ------------------------------------------------------------------ file upload endpoint
    async def _handle_upload(self, request: web.Request) -> web.Response:
        file_id = self._upload_tickets.get(request.match_info["ticket"])
        if file_id is None:
            return web.Response(status=404, text="invalid upload ticket")
        upload = self.files[file_id]
        if request.content_type == "multipart/form-data":
            data = b""
            reader = await request.multipart()
            async for part in reader:
                if isinstance(part, BodyPartReader) and part.filename is not None:
                    data = bytes(await part.read())
                    break
        else:
            data = await request.read()
        if len(data) != upload.length:
            self._warn(
                f"upload of {upload.filename}: files.getUploadURLExternal declared length="
                f"{upload.length} but {len(data)} bytes were uploaded"
            )
        upload.content = data
        self._notify()
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    # ------------------------------------------------------------------ response_url endpoint
    async def _handle_response(self, request: web.Request) -> web.Response:
        rid = request.match_info["rid"]
        posts = self._response_urls.get(rid)
        if posts is None:
            return web.Response(status=404, text="invalid_url")
        url = f"{self.base_url}/response/{rid}"
        body: Any
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        status, error = 200, None
        if time.monotonic() - self._response_url_minted[rid] > RESPONSE_URL_LIFETIME_SECONDS:
            status, error = 404, "expired_url"
        elif len(posts) >= RESPONSE_URL_MAX_USES:
            status, error = 404, "used_url"
        elif not isinstance(body, dict):
            status, error = 400, "invalid_payload"
        elif body.get("response_type", "ephemeral") not in ("ephemeral", "in_channel"):
            status, error = 400, "invalid_payload"
        else:
            try:
                self._warn_missing_fallback("response_url", self._content(body), url)
            except SlackError as e:
                status, error = 400, e.error
        record = ResponsePost(url, body if isinstance(body, dict) else {}, time.monotonic(),
                              status, error)
        posts.append(record)
        self.responses.append(record)
        self._notify()
        return web.Response(status=status, text=error or "ok", content_type="text/plain")

    # ------------------------------------------------------------------ acks (HTTP and Socket Mode)
    def _check_ack(self, kind: str, where: str, payload: Any, elapsed: float) -> None:
        """Judge an ack as Slack would: in time, and a body Slack can show (or none)."""
        if elapsed > self.ack_deadline:
            self._warn(f"{where}: {kind} acked after {elapsed:.2f}s (> {self.ack_deadline:g}s); "
                       "Slack would have shown the user a timeout")
        if kind == "view_submission" and self._submitting is not None:
            self._submitting.acks.append(payload if isinstance(payload, dict) else {})
            if payload is None or payload == "" or payload == {}:
                self._submitting.closed = True  # an empty ack closes the modal
                return
            self._check_view_ack(where, payload, self._submitting)
            return
        if payload is None or payload == "" or payload == {}:
            return
        if kind != "slash_commands":
            self._warn(f"{where}: the ack of a {kind} carries a body that Slack ignores "
                       "(reply through response_url or the Web API)")
            return
        if not isinstance(payload, dict):
            self._warn(f"{where}: slash command ack body is not a JSON object: {payload!r:.200}")
            return
        if payload.get("response_type", "ephemeral") not in ("ephemeral", "in_channel"):
            self._warn(f"{where}: slash command ack has response_type="
                       f"{payload.get('response_type')!r}; Slack wants ephemeral or in_channel")
        try:
            self._warn_missing_fallback(f"{where}: slash command ack", self._content(payload), kind)
        except SlackError as e:
            self._warn(f"{where}: slash command ack body rejected: {e.error} "
                       f"{e.extra.get('errors', [])}")

    def _check_view_ack(self, where: str, payload: Any, view: OpenView) -> None:
        """A view_submission's ack may carry a response_action: errors keyed by the view's input
        block ids (the modal stays open, showing them), update/push a valid modal, or clear."""
        action = payload.get("response_action") if isinstance(payload, dict) else None
        if action == "errors":
            errors = payload.get("errors")
            inputs = {b.get("block_id") for b in view.view.get("blocks", []) if b.get("type") == "input"}
            if not isinstance(errors, dict) or not errors:
                self._warn(f"{where}: response_action errors without an errors object")
            for block_id, message in (errors or {}).items():
                if block_id not in inputs:
                    self._warn(f"{where}: error for {block_id!r}, which is no input block of the view")
                if not isinstance(message, str) or not message:
                    self._warn(f"{where}: the error for {block_id!r} is not a non-empty string")
        elif action in ("update", "push"):
            problems = validate_view(payload.get("view"), "modal")
            if problems:
                self._warn(f"{where}: response_action {action} with an invalid view: {problems}")
        elif action == "clear":
            view.closed = True
        else:
            self._warn(f"{where}: a view_submission ack body Slack does not understand: {payload!r:.200}")

    async def submit_view(self, url: str, view_id: str, user: str,
                          values: Mapping[str, Mapping[str, str]]) -> HttpAck:
        """The user fills in the open modal `view_id` (`values`: block_id -> action_id -> typed text) and
        presses its submit button: Slack POSTs the view_submission (signed) and judges the ack."""
        view = self.views.get(view_id)
        if view is None or view.closed:
            raise ValueError(f"no open modal {view_id!r}: Slack shows nothing to submit")
        if view.user != user:
            raise ValueError(f"modal {view_id} was opened for {view.user}, not {user}")
        state: JSON = {}
        for block in view.view.get("blocks", []):
            if block.get("type") != "input":
                continue
            element = block["element"]
            typed = values.get(block.get("block_id", ""), {}).get(element.get("action_id", ""))
            if typed is None and not block.get("optional"):
                raise ValueError(f"input {block.get('block_id')!r} is required: Slack would not submit the modal")
            if typed is not None and len(typed) > int(element.get("max_length", 3000)):
                raise ValueError(f"Slack would not let {len(typed)} characters be typed into "
                                 f"{block.get('block_id')!r} (max_length {element.get('max_length')})")
            state[block.get("block_id", "")] = {element.get("action_id", ""): {"type": element["type"],
                                                                                "value": typed}}
        payload = {
            "type": "view_submission", "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
            "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
            "api_app_id": API_APP_ID, "token": VERIFICATION_TOKEN, "trigger_id": self.trigger_id(user),
            "view": {**view.view, "id": view_id, "team_id": TEAM_ID, "app_id": API_APP_ID, "bot_id": BOT_ID,
                     "state": {"values": state}, "hash": f"{int(time.time())}.{uuid.uuid4().hex[:8]}"},
            "response_urls": [], "is_enterprise_install": False,
        }
        self._submitting = view
        try:
            return await self.deliver(url, block_actions_body(payload))
        finally:
            self._submitting = None

    async def deliver_event(self, url: str, event: JSON, *, timeout: float = 30.0) -> HttpAck:  # noqa: ASYNC109
        """POST an Events API `event_callback` (JSON, signed) to the app's Request URL, as Slack does for
        an event the manifest subscribes to and the granted scopes allow; the ack must be HTTP 200."""
        kind = str(event.get("type"))
        if kind not in self.events:
            raise ValueError(f"Slack sends {kind} only to apps whose manifest subscribes to it")
        scope = EVENT_SCOPES.get(kind)
        if scope is not None and scope not in self.scopes:
            raise ValueError(f"Slack sends {kind} only to apps granted {scope}")
        body = json.dumps({
            "token": VERIFICATION_TOKEN, "team_id": TEAM_ID, "api_app_id": API_APP_ID,
            "event": {"event_ts": f"{time.time():.6f}", **event}, "type": "event_callback",
            "event_id": self._next_id("Ev"), "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True,
                                "is_enterprise_install": False}],
            "is_ext_shared_channel": False,
        }).encode()
        return await self._post_to_app(url, body, "application/json", "event_callback", timeout)

    async def deliver(self, url: str, body: bytes, *, timeout: float = 30.0) -> HttpAck:  # noqa: ASYNC109
        """POST a slash command or interaction (form `body`, see `signing`) to the app's
        Request URL, signed with `signing_secret`, as Slack does; the ack is judged by
        `_check_ack`, recorded in `http_acks` and returned."""
        form = parse_qs(body.decode())
        if "payload" in form:
            kind = str(json.loads(form["payload"][0]).get("type"))
        elif "command" in form:
            kind = "slash_commands"
            channel = self._check_command_source(form.get("channel_id", [""])[0])
            channel.members.update(form.get("user_id", [])[:1])
        else:
            raise ValueError("neither a slash command nor an interaction payload")
        return await self._post_to_app(url, body, "application/x-www-form-urlencoded", kind, timeout)

    async def _post_to_app(self, url: str, body: bytes, content_type: str, kind: str,
                           timeout: float) -> HttpAck:  # noqa: ASYNC109
        headers = {"Content-Type": content_type, **sign(body, self.signing_secret)}
        started = time.monotonic()
        async with aiohttp.ClientSession() as http, http.post(
            url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as response:
            text = await response.text()
            ack = HttpAck(url, kind, response.status, text, response.content_type,
                          time.monotonic() - started)
        self.http_acks.append(ack)
        where = f"HTTP ack from {url}"
        if ack.status_code != 200:
            self._check_ack(kind, where, None, ack.elapsed)
            self._warn(f"{where}: HTTP {ack.status_code} to a {kind}; Slack shows the user an error")
        else:
            payload: Any = text
            if ack.content_type == "application/json" and text:
                try:
                    payload = json.loads(text)
                except ValueError:
                    self._warn(f"{where}: invalid JSON body {text[:200]!r}")
                    payload = None
            elif kind == "slash_commands" and text:
                payload = {"text": text}  # a plain-text body is shown as an ephemeral message
            self._check_ack(kind, where, payload, ack.elapsed)
        self._notify()
        return ack

    # ------------------------------------------------------------------ Socket Mode
    async def _handle_link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._ws_tickets:
            return web.Response(status=401, text="invalid or already used ticket")
        self._ws_tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True, timeout=2.0)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.socket_connects += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "applink-fake-1", "build_number": 1,
                               "approximate_connection_time": 18060},
                "connection_info": {"app_id": API_APP_ID},
            }
        )
        self._notify()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._on_socket_text(str(msg.data))
                elif msg.type == WSMsgType.BINARY:
                    self._warn("socket mode: client sent a binary frame")
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
            self._notify()
        return ws

    def _on_socket_text(self, data: str) -> None:
        now = time.monotonic()
        try:
            msg = json.loads(data)
        except ValueError:
            self._warn(f"socket mode: client sent non-JSON text {data[:200]!r}")
            return
        envelope_id = msg.get("envelope_id") if isinstance(msg, dict) else None
        pending = self._pending.get(envelope_id) if isinstance(envelope_id, str) else None
        if pending is None:
            self._warn(f"socket mode: ack for unknown envelope_id {envelope_id!r}")
            return
        if pending.done():
            self._warn(f"socket mode: duplicate ack for envelope {envelope_id}")
            return
        elapsed = now - pending.sent_at
        payload = msg.get("payload")
        self._check_ack(pending.envelope["type"], f"socket mode envelope {envelope_id}", payload,
                        elapsed)
        ack = SocketAck(pending.envelope_id, payload if isinstance(payload, dict) else None, elapsed)
        pending._future.set_result(ack)
        self._notify()

    async def socket_send(
        self,
        envelope_type: str,
        payload: JSON,
        *,
        accepts_response_payload: bool,
        connect_timeout: float = 10.0,
    ) -> PendingAck:
        """Push an envelope to the most recent Socket Mode connection; returns a PendingAck."""
        await self.wait_for_socket(connect_timeout)
        ws = self._sockets[-1]
        envelope: JSON = {
            "envelope_id": str(uuid.uuid4()),
            "type": envelope_type,
            "accepts_response_payload": accepts_response_payload,
            "payload": payload,
        }
        future: asyncio.Future[SocketAck] = asyncio.get_running_loop().create_future()
        pending = PendingAck(envelope, time.monotonic(), future)
        self._pending[pending.envelope_id] = pending
        await ws.send_str(json.dumps(envelope))
        return pending

    async def socket_send_slash_command(
        self,
        command: str,
        text: str = "",
        *,
        channel_id: str,
        user_id: str = "U0TESTER",
        response_url: str | None = None,
        trigger_id: str | None = None,
        user_name: str = "tester",
    ) -> PendingAck:
        """Push a `slash_commands` envelope as Slack does; `await` the result for the ack."""
        channel = self._check_command_source(channel_id)
        channel.members.add(user_id)
        payload = slash_command_payload(
            command,
            text,
            user_id,
            channel.id,
            response_url if response_url is not None else self.response_url(),
            trigger_id or f"{next(self._ids)}.{TEAM_ID}.{uuid.uuid4().hex}",
            user_name=user_name,
            channel_name=channel.name,
        )
        return await self.socket_send("slash_commands", dict(payload), accepts_response_payload=True)

    async def socket_send_interaction(self, payload: JSON) -> PendingAck:
        """Push an `interactive` envelope (a button click, a view submission) as Slack does; a click's
        ack carries no response payload."""
        kind = payload.get("type")
        return await self.socket_send("interactive", payload, accepts_response_payload=kind == "view_submission")

    async def socket_disconnect(self, reason: str = "refresh_requested") -> None:
        """Send Slack's `disconnect` message on every open connection (clients reconnect)."""
        for ws in list(self._sockets):
            await ws.send_json(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake-1"}}
            )


__all__ = [
    "BOT_ID",
    "BOT_USER_ID",
    "MANIFEST",
    "TEAM_DOMAIN",
    "TEAM_ID",
    "Call",
    "Channel",
    "Ephemeral",
    "FakeSlack",
    "HomePublish",
    "HttpAck",
    "Message",
    "MessageEdit",
    "OpenView",
    "PendingAck",
    "ResponsePost",
    "SlackError",
    "SocketAck",
    "UploadedFile",
    "manifest_bot_scopes",
]
