"""Strict in-process fake of Slack's Web API, Socket Mode link and response_url endpoints.

It rejects what real Slack rejects (auth, token type, scopes, channels, Block Kit, lengths).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self

from aiohttp import BodyPartReader, WSCloseCode, WSMsgType, web
from aiohttp.web_request import FileField

from .blockkit import validate_blocks
from .signing import API_APP_ID, TEAM_DOMAIN, TEAM_ID, VERIFICATION_TOKEN, slash_command_payload

JSON = dict[str, Any]
TokenType = Literal["bot", "app"]
MethodHandler = Callable[[JSON], JSON | Awaitable[JSON]]

BOT_USER_ID = "UBOT"
BOT_USER_NAME = "proofbot"
BOT_ID = "B0TEST"
TEAM_NAME = "Fake Team"
PERMALINK_BASE = "https://fake.slack.test"
MAX_MESSAGE_TEXT = 40_000
MAX_MARKDOWN_TEXT = 12_000
MAX_ALT_TXT = 1_000
ACK_DEADLINE_SECONDS = 3.0
RESPONSE_URL_MAX_USES = 5
FIRST_TS_SECONDS = 1_700_000_000

DEFAULT_BOT_SCOPES: tuple[str, ...] = (
    "chat:write",
    "chat:write.public",
    "commands",
    "files:read",
    "files:write",
    "channels:read",
    "groups:read",
    "im:read",
)
DEFAULT_APP_SCOPES: tuple[str, ...] = ("connections:write",)

CHANNEL_ID_RE = re.compile(r"^[CGD][A-Z0-9]+$")
USER_ID_RE = re.compile(r"^[UW][A-Z0-9]+$")
TS_RE = re.compile(r"^\d{10}\.\d{6}$")


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
    attachments: list[JSON] | None = None
    reply_broadcast: bool = False
    metadata: Any = None
    edits: list[MessageEdit] = field(default_factory=list)
    deleted: bool = False

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts

    @property
    def update_times(self) -> list[float]:
        return [e.at for e in self.edits]

    def as_dict(self) -> JSON:
        d: JSON = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": API_APP_ID,
            "team": TEAM_ID,
            "text": self.text,
            "ts": self.ts,
        }
        if self.blocks is not None:
            d["blocks"] = self.blocks
        if self.attachments is not None:
            d["attachments"] = self.attachments
        if self.thread_ts is not None:
            d["thread_ts"] = self.thread_ts
        if self.edits:
            d["edited"] = {"user": BOT_USER_ID, "ts": self.ts}
        return d


@dataclass
class Ephemeral:
    """A chat.postEphemeral message (not addressable by chat.update / getPermalink)."""

    channel: str
    user: str
    message_ts: str
    text: str
    blocks: list[JSON] | None
    thread_ts: str | None
    at: float


@dataclass
class UploadedFile:
    """A file going through files.getUploadURLExternal -> upload -> completeUploadExternal."""

    id: str
    filename: str
    length: int
    upload_url: str
    content: bytes | None = None
    title: str | None = None
    alt_txt: str | None = None
    snippet_type: str | None = None
    completed: bool = False
    channels: list[str] = field(default_factory=list)
    thread_ts: str | None = None
    initial_comment: str | None = None

    def as_dict(self) -> JSON:
        return {
            "id": self.id,
            "name": self.filename,
            "title": self.title or self.filename,
            "size": len(self.content or b""),
            "user": BOT_USER_ID,
            "channels": list(self.channels),
            "url_private": f"https://files.fake.slack.test/files-pri/{TEAM_ID}-{self.id}/"
            f"{self.filename}",
            "permalink": f"{PERMALINK_BASE}/files/{BOT_USER_ID}/{self.id}/{self.filename}",
        }


@dataclass
class SocketAck:
    """The acknowledgement a Socket Mode client sent back for one envelope."""

    envelope_id: str
    payload: JSON | None
    elapsed: float
    received_at: float
    raw: JSON


@dataclass
class ResponsePost:
    """One POST to a minted response_url."""

    url: str
    body: JSON
    at: float
    status: int
    error: str | None = None


@dataclass
class Channel:
    """A conversation the fake knows about."""

    id: str
    name: str
    is_private: bool = False
    is_im: bool = False
    is_archived: bool = False

    def as_dict(self) -> JSON:
        return {
            "id": self.id,
            "name": self.name,
            "is_channel": not self.is_private and not self.is_im,
            "is_group": self.is_private,
            "is_im": self.is_im,
            "is_private": self.is_private or self.is_im,
            "is_archived": self.is_archived,
            "is_member": True,
            "created": FIRST_TS_SECONDS,
            "context_team_id": TEAM_ID,
        }


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
class _MethodSpec:
    handler: MethodHandler
    token: TokenType
    scope: str | None


@dataclass
class _RateLimit:
    max_calls: int
    per_seconds: float
    accepted: list[float] = field(default_factory=list)


@dataclass
class _Content:
    text: str
    blocks: list[JSON] | None
    attachments: list[JSON] | None
    missing_fallback: bool


def _opt_str(value: Any) -> str | None:
    if value is None:
        return None
    s = value if isinstance(value, str) else str(value)
    return s or None


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() in {"1", "true", "yes"}
    return bool(value)


def _json_value(value: Any, error: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise SlackError(error) from None
    return value


class FakeSlack:
    """Fake Slack on 127.0.0.1 (random port): `async with FakeSlack() as slack: ...`.

    Point clients at it with `AsyncWebClient(token=..., base_url=slack.api_url)`.
    """

    def __init__(
        self,
        bot_token: str = "xoxb-test",
        app_token: str = "xapp-test",
        *,
        scopes: Iterable[str] = DEFAULT_BOT_SCOPES,
        app_scopes: Iterable[str] = DEFAULT_APP_SCOPES,
        channels: Mapping[str, str] | None = None,
    ) -> None:
        """`channels` maps channel id -> name; when given, any other channel is
        `channel_not_found`. When omitted, any well-formed id (C.../G.../D...) is accepted."""
        if not bot_token.startswith("xoxb-"):
            raise ValueError("bot_token must start with xoxb-")
        if not app_token.startswith("xapp-"):
            raise ValueError("app_token must start with xapp-")
        self.bot_token = bot_token
        self.app_token = app_token
        self.scopes: set[str] = set(scopes)
        self.app_scopes: set[str] = set(app_scopes)
        self.strict_channels = channels is not None
        self.channels: dict[str, Channel] = {}
        for cid, name in (channels or {}).items():
            self.add_channel(cid, name)

        self.calls: list[Call] = []
        self.warnings: list[str] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.ephemerals: list[Ephemeral] = []
        self.files: dict[str, UploadedFile] = {}
        self.responses: list[ResponsePost] = []
        self.socket_sent: list[JSON] = []
        self.socket_received: list[JSON] = []
        self.socket_connects = 0
        self.ack_deadline = ACK_DEADLINE_SECONDS

        self._methods: dict[str, _MethodSpec] = {}
        self._rate_limits: dict[str, _RateLimit] = {}
        self._ts_counter = itertools.count(100, 100)
        self._ids = itertools.count(1)
        self._upload_tickets: dict[str, str] = {}
        self._ws_tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._pending: dict[str, PendingAck] = {}
        self._response_urls: dict[str, list[ResponsePost]] = {}
        self._event = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._register_builtin_methods()

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
        await self.close()

    async def start(self) -> None:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/upload/v1/{ticket}", self._handle_upload)
        app.router.add_get("/link", self._handle_link)
        app.router.add_get("/link/", self._handle_link)
        app.router.add_post("/response/{rid}", self._handle_response)
        app.on_shutdown.append(self._on_shutdown)
        self._runner = web.AppRunner(app, shutdown_timeout=2.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

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
    ) -> Channel:
        if not CHANNEL_ID_RE.match(channel_id):
            raise ValueError(f"not a channel id: {channel_id!r}")
        ch = Channel(
            channel_id,
            name,
            is_private=is_private or channel_id.startswith("G"),
            is_im=channel_id.startswith("D"),
            is_archived=is_archived,
        )
        self.channels[channel_id] = ch
        return ch

    def set_rate_limit(self, method: str, max_calls: int, per_seconds: float) -> None:
        """Answer HTTP 429 `ratelimited` (with Retry-After) past `max_calls` per window."""
        self._rate_limits[method] = _RateLimit(max_calls, per_seconds)

    def add_method(
        self,
        name: str,
        handler: MethodHandler,
        *,
        scope: str | None = None,
        token: TokenType = "bot",
    ) -> None:
        """Serve another Web API method; `handler(args)` returns the body (ok is added) or
        raises SlackError."""
        self._methods[name] = _MethodSpec(handler, token, scope)

    # ------------------------------------------------------------------ inspection
    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def call_times(self, method: str, *, ok_only: bool = True) -> list[float]:
        """Monotonic arrival times of calls to `method` (successful ones by default)."""
        return [c.at for c in self.calls_to(method) if c.ok or not ok_only]

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

    def response_url(self) -> str:
        """Mint a response_url served by this fake; POSTs are recorded in `responses`."""
        rid = uuid.uuid4().hex
        self._response_urls[rid] = []
        return f"{self.base_url}/response/{rid}"

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
            body = await self._dispatch(method, args, token, at)
            if token == self.bot_token:
                headers["x-oauth-scopes"] = ",".join(sorted(self.scopes))
        except SlackError as e:
            body, status, headers = e.body(), e.status, e.headers
        self.calls.append(Call(method, args, at, token, status, body))
        self._notify()
        return web.json_response(body, status=status, headers=headers)

    async def _dispatch(self, method: str, args: JSON, token: str | None, at: float) -> JSON:
        spec = self._methods.get(method)
        if spec is None:
            raise SlackError("unknown_method")
        if not token:
            raise SlackError("not_authed")
        if token == self.bot_token:
            kind: TokenType = "bot"
        elif token == self.app_token:
            kind = "app"
        else:
            raise SlackError("invalid_auth")
        if kind != spec.token:
            raise SlackError("not_allowed_token_type")
        granted = self.scopes if kind == "bot" else self.app_scopes
        if spec.scope is not None and spec.scope not in granted:
            raise SlackError(
                "missing_scope", needed=spec.scope, provided=",".join(sorted(granted))
            )
        self._check_rate_limit(method, at)
        result = spec.handler(args)
        if inspect.isawaitable(result):
            result = await result
        return {"ok": True, **result}

    def _check_rate_limit(self, method: str, at: float) -> None:
        limit = self._rate_limits.get(method)
        if limit is None:
            return
        limit.accepted = [t for t in limit.accepted if at - t < limit.per_seconds]
        if len(limit.accepted) >= limit.max_calls:
            retry_after = max(1, math.ceil(limit.per_seconds - (at - limit.accepted[0])))
            raise SlackError("ratelimited", status=429, headers={"Retry-After": str(retry_after)})
        limit.accepted.append(at)

    def _register_builtin_methods(self) -> None:
        self.add_method("auth.test", self._auth_test)
        self.add_method("chat.postMessage", self._chat_post_message, scope="chat:write")
        self.add_method("chat.update", self._chat_update, scope="chat:write")
        self.add_method("chat.delete", self._chat_delete, scope="chat:write")
        self.add_method("chat.postEphemeral", self._chat_post_ephemeral, scope="chat:write")
        self.add_method("chat.getPermalink", self._chat_get_permalink)
        self.add_method("conversations.info", self._conversations_info)
        self.add_method(
            "files.getUploadURLExternal", self._files_get_upload_url, scope="files:write"
        )
        self.add_method(
            "files.completeUploadExternal", self._files_complete_upload, scope="files:write"
        )
        self.add_method(
            "apps.connections.open",
            self._apps_connections_open,
            scope="connections:write",
            token="app",
        )

    # ------------------------------------------------------------------ validation helpers
    def _channel(self, value: Any, *, error: str = "channel_not_found") -> str:
        cid = _opt_str(value)
        if cid is None:
            raise SlackError(error)
        if cid.startswith("#"):
            for ch in self.channels.values():
                if ch.name == cid[1:]:
                    return ch.id
            raise SlackError(error)
        if cid in self.channels:
            return cid
        if USER_ID_RE.match(cid):  # posting to a user id goes to the bot's DM with them
            dm = "D" + cid[1:]
            if dm not in self.channels:
                self.add_channel(dm, cid)
            return dm
        if not self.strict_channels and CHANNEL_ID_RE.match(cid):
            self.add_channel(cid, f"channel-{cid.lower()}")
            return cid
        raise SlackError(error)

    def _content(self, method: str, args: JSON) -> _Content:
        text = _opt_str(args.get("text")) or ""
        markdown_text = _opt_str(args.get("markdown_text"))
        blocks_raw = _json_value(args.get("blocks"), "invalid_blocks_format")
        if blocks_raw is not None and not isinstance(blocks_raw, list):
            raise SlackError("invalid_blocks_format")
        blocks: list[JSON] | None = blocks_raw
        attachments_raw = _json_value(args.get("attachments"), "invalid_attachments")
        if attachments_raw is not None and not isinstance(attachments_raw, list):
            raise SlackError("invalid_attachments")
        attachments: list[JSON] | None = attachments_raw
        if markdown_text is not None:
            if text or blocks:
                raise SlackError("markdown_text_conflict")
            if len(markdown_text) > MAX_MARKDOWN_TEXT:
                raise SlackError("msg_too_long")
            text = markdown_text
        if not text and not blocks and not attachments:
            raise SlackError("no_text")
        if len(text) > MAX_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        if blocks:
            errors = validate_blocks(blocks)
            if errors:
                raise SlackError(
                    "invalid_blocks", errors=errors, response_metadata={"messages": errors}
                )
        missing_fallback = bool(blocks) and not text.strip()
        return _Content(text, blocks, attachments, missing_fallback)

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

    def _check_writable(self, channel: str) -> None:
        if self.channels[channel].is_archived:
            raise SlackError("is_archived")

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
        channel = self._channel(args.get("channel"))
        self._check_writable(channel)
        content = self._content("chat.postMessage", args)
        thread_ts = self._thread_root("chat.postMessage", channel, _opt_str(args.get("thread_ts")))
        ts = self._next_ts()
        msg = Message(
            channel=channel,
            ts=ts,
            text=content.text,
            blocks=content.blocks,
            thread_ts=thread_ts,
            posted_at=time.monotonic(),
            attachments=content.attachments,
            reply_broadcast=_bool(args.get("reply_broadcast")),
            metadata=args.get("metadata"),
        )
        self.messages[(channel, ts)] = msg
        self._warn_missing_fallback("chat.postMessage", content, f"{channel}/{ts}")
        return {"channel": channel, "ts": ts, "message": msg.as_dict()}

    def _existing_message(self, args: JSON, ts_arg: str) -> Message:
        channel = self._channel(args.get("channel"))
        ts = _opt_str(args.get(ts_arg))
        if ts is None:
            raise _invalid_arguments(ts_arg)
        msg = self.messages.get((channel, ts))
        if msg is None or msg.deleted:
            raise SlackError("message_not_found")
        return msg

    def _chat_update(self, args: JSON) -> JSON:
        msg = self._existing_message(args, "ts")
        self._check_writable(msg.channel)
        content = self._content("chat.update", args)
        msg.text = content.text
        if content.blocks is not None:
            msg.blocks = content.blocks
        if content.attachments is not None:
            msg.attachments = content.attachments
        msg.edits.append(MessageEdit(content.text, content.blocks, time.monotonic()))
        self._warn_missing_fallback("chat.update", content, f"{msg.channel}/{msg.ts}")
        return {"channel": msg.channel, "ts": msg.ts, "text": msg.text, "message": msg.as_dict()}

    def _chat_delete(self, args: JSON) -> JSON:
        msg = self._existing_message(args, "ts")
        msg.deleted = True
        return {"channel": msg.channel, "ts": msg.ts}

    def _chat_post_ephemeral(self, args: JSON) -> JSON:
        channel = self._channel(args.get("channel"))
        self._check_writable(channel)
        user = _opt_str(args.get("user"))
        if user is None:
            raise _invalid_arguments("user")
        if not USER_ID_RE.match(user):
            raise SlackError("user_not_in_channel")
        content = self._content("chat.postEphemeral", args)
        ts = self._next_ts()
        self.ephemerals.append(
            Ephemeral(
                channel=channel,
                user=user,
                message_ts=ts,
                text=content.text,
                blocks=content.blocks,
                thread_ts=_opt_str(args.get("thread_ts")),
                at=time.monotonic(),
            )
        )
        self._warn_missing_fallback("chat.postEphemeral", content, f"{channel}/{user}")
        return {"message_ts": ts}

    def _chat_get_permalink(self, args: JSON) -> JSON:
        msg = self._existing_message(args, "message_ts")
        return {"channel": msg.channel, "permalink": self.permalink(msg.channel, msg.ts)}

    def _conversations_info(self, args: JSON) -> JSON:
        cid = _opt_str(args.get("channel"))
        if cid is None or cid.startswith("#"):
            raise SlackError("channel_not_found")
        channel = self.channels[self._channel(cid)]
        needed = "im:read" if channel.is_im else "groups:read" if channel.is_private else (
            "channels:read"
        )
        if needed not in self.scopes:
            raise SlackError(
                "missing_scope", needed=needed, provided=",".join(sorted(self.scopes))
            )
        return {"channel": channel.as_dict()}

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
        alt_txt = _opt_str(args.get("alt_txt"))
        if alt_txt is not None and len(alt_txt) > MAX_ALT_TXT:
            raise SlackError("alt_txt_too_large")
        file_id = self._next_id("F")
        ticket = uuid.uuid4().hex
        upload_url = f"{self.base_url}/upload/v1/{ticket}"
        assert filename is not None
        self.files[file_id] = UploadedFile(
            id=file_id,
            filename=filename,
            length=length,
            upload_url=upload_url,
            alt_txt=alt_txt,
            snippet_type=_opt_str(args.get("snippet_type")),
        )
        self._upload_tickets[ticket] = file_id
        return {"upload_url": upload_url, "file_id": file_id}

    def _files_complete_upload(self, args: JSON) -> JSON:
        items = _json_value(args.get("files"), "invalid_arguments")
        if not isinstance(items, list) or not items:
            raise _invalid_arguments("files")
        channels: list[str] = []
        if _opt_str(args.get("channel_id")) is not None:
            channels.append(self._channel(args["channel_id"], error="invalid_channel"))
        for cid in (_opt_str(args.get("channels")) or "").split(","):
            if cid.strip():
                channels.append(self._channel(cid.strip(), error="invalid_channel"))
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
            upload.initial_comment = _opt_str(args.get("initial_comment"))
        return {"files": [u.as_dict() for u in uploads]}

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
        raw = await request.read()
        body: Any
        try:
            if request.content_type == "application/x-www-form-urlencoded":
                form = await request.post()
                body = json.loads(str(form.get("payload", "")))
            else:
                body = json.loads(raw)
        except ValueError:
            body = None
        status, error = 200, None
        if len(posts) >= RESPONSE_URL_MAX_USES:
            status, error = 404, "used_url"
        elif not isinstance(body, dict):
            status, error = 400, "invalid_payload"
        elif body.get("response_type", "ephemeral") not in ("ephemeral", "in_channel"):
            status, error = 400, "invalid_payload"
        elif not _bool(body.get("delete_original")):
            try:
                content = self._content("response_url", body)
                self._warn_missing_fallback("response_url", content, url)
            except SlackError as e:
                status, error = 400, e.error
        recorded_body = body if isinstance(body, dict) else {}
        record = ResponsePost(url, recorded_body, time.monotonic(), status, error)
        posts.append(record)
        self.responses.append(record)
        self._notify()
        return web.Response(status=status, text=error or "ok", content_type="text/plain")

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
                "debug_info": {
                    "host": "applink-fake-1",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
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
        if not isinstance(msg, dict):
            self._warn(f"socket mode: client sent non-object JSON {data[:200]!r}")
            return
        self.socket_received.append(msg)
        envelope_id = msg.get("envelope_id")
        pending = self._pending.get(envelope_id) if isinstance(envelope_id, str) else None
        if pending is None:
            self._warn(f"socket mode: ack for unknown envelope_id {envelope_id!r}")
            return
        envelope_id = pending.envelope_id
        if pending.done():
            self._warn(f"socket mode: duplicate ack for envelope {envelope_id}")
            return
        elapsed = now - pending.sent_at
        payload = msg.get("payload")
        kind = pending.envelope["type"]
        if elapsed > self.ack_deadline:
            self._warn(
                f"socket mode: {kind} envelope {envelope_id} acked after {elapsed:.2f}s "
                f"(> {self.ack_deadline:g}s); Slack would have reported a timeout"
            )
        if payload is not None:
            if not isinstance(payload, dict):
                self._warn(f"socket mode: ack payload for {envelope_id} is not an object")
                payload = None
            elif not pending.envelope["accepts_response_payload"]:
                self._warn(
                    f"socket mode: ack for {kind} envelope {envelope_id} carries a payload "
                    "that Slack ignores (accepts_response_payload is false)"
                )
            elif kind == "slash_commands" and ("text" in payload or "blocks" in payload):
                try:
                    content = self._content("slash command ack", payload)
                    self._warn_missing_fallback("slash command ack", content, envelope_id)
                except SlackError as e:
                    detail = e.extra.get("errors", [])
                    self._warn(
                        f"socket mode: ack payload for {envelope_id} rejected: {e.error} {detail}"
                    )
        ack = SocketAck(envelope_id, payload, elapsed, now, msg)
        pending._future.set_result(ack)
        self._notify()

    async def socket_send(
        self,
        envelope_type: str,
        payload: JSON,
        *,
        accepts_response_payload: bool,
        connect_timeout: float = 10.0,
        extra: Mapping[str, Any] | None = None,
    ) -> PendingAck:
        """Push an envelope to the most recent Socket Mode connection; returns a PendingAck."""
        await self.wait_for_socket(connect_timeout)
        ws = self._sockets[-1]
        envelope: JSON = {
            "envelope_id": str(uuid.uuid4()),
            "type": envelope_type,
            "accepts_response_payload": accepts_response_payload,
            "payload": payload,
            **(extra or {}),
        }
        future: asyncio.Future[SocketAck] = asyncio.get_running_loop().create_future()
        pending = PendingAck(envelope, time.monotonic(), future)
        self._pending[pending.envelope_id] = pending
        self.socket_sent.append(envelope)
        await ws.send_str(json.dumps(envelope))
        return pending

    async def socket_send_slash_command(
        self,
        command: str,
        text: str = "",
        user_id: str = "U0TESTER",
        channel_id: str = "C0TEST",
        response_url: str | None = None,
        trigger_id: str | None = None,
        *,
        user_name: str = "tester",
        channel_name: str | None = None,
    ) -> PendingAck:
        """Push a `slash_commands` envelope as Slack does; `await` the result for the ack."""
        channel = self._channel(channel_id)
        payload = slash_command_payload(
            command,
            text,
            user_id,
            channel,
            response_url if response_url is not None else self.response_url(),
            trigger_id or f"{next(self._ids)}.{TEAM_ID}.{uuid.uuid4().hex}",
            user_name=user_name,
            channel_name=channel_name or self.channels[channel].name,
        )
        return await self.socket_send("slash_commands", dict(payload), accepts_response_payload=True)

    async def socket_send_interactive(self, payload: JSON) -> PendingAck:
        """Push an `interactive` envelope (block_actions, view_submission, ...)."""
        return await self.socket_send("interactive", payload, accepts_response_payload=True)

    async def socket_send_event(self, event: JSON) -> PendingAck:
        """Push an `events_api` envelope wrapping `event` in an event_callback."""
        payload: JSON = {
            "token": VERIFICATION_TOKEN,
            "team_id": TEAM_ID,
            "api_app_id": API_APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": self._next_id("Ev"),
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": uuid.uuid4().hex,
        }
        return await self.socket_send(
            "events_api",
            payload,
            accepts_response_payload=False,
            extra={"retry_attempt": 0, "retry_reason": ""},
        )

    async def socket_disconnect(self, reason: str = "refresh_requested") -> None:
        """Send Slack's `disconnect` message on every open connection (clients reconnect)."""
        for ws in list(self._sockets):
            await ws.send_json(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake-1"}}
            )


__all__ = [
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_DOMAIN",
    "TEAM_ID",
    "Call",
    "Channel",
    "Ephemeral",
    "FakeSlack",
    "Message",
    "MessageEdit",
    "PendingAck",
    "ResponsePost",
    "SlackError",
    "SocketAck",
    "UploadedFile",
]
