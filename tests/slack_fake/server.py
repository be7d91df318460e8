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

`FakeSlack` is this module (set-up, lifecycle, the Web API's plumbing) and three mixins by purpose:
`web_api` (each method as Slack answers it), `delivery` (to the app, and its acks judged) and `queries`
(what a test reads back); `records` holds what it records.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Self

from aiohttp import WSCloseCode, web
from aiohttp.web_request import FileField

from .delivery import Delivery
from .limits import RateLimits
from .queries import Queries
from .records import (
    ACK_DEADLINE_SECONDS,
    CHANNEL_ID_RE,
    DEFAULT_APP_SCOPES,
    FIRST_TS_SECONDS,
    JSON,
    PERMALINK_BASE,
    SIGNING_SECRET,
    USER_ID_RE,
    Call,
    Channel,
    Ephemeral,
    HomePublish,
    HttpAck,
    Message,
    OpenView,
    PendingAck,
    ResponsePost,
    SlackError,
    TokenType,
    UploadedFile,
    _opt_str,
    manifest_bot_events,
    manifest_bot_scopes,
)
from .signing import (
    TEAM_ID,
)
from .usergroups import UserGroup, UserGroups
from .web_api import WebApiMethods


class FakeSlack(Queries, WebApiMethods, UserGroups, Delivery):
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
        self.usergroups: dict[str, UserGroup] = {}
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
            "conversations.history": (self._conversations_history, "bot", None),  # scope by channel type
            "usergroups.list": (self._usergroups_list, "bot", "usergroups:read"),
            "usergroups.users.list": (self._usergroups_users_list, "bot", "usergroups:read"),
        }
        self.rate_limits = RateLimits()
        # TCP connections the Web API and uploads were called over (a client that keeps them alive reuses them):
        # each transport numbered when its first request comes; a closed one is forgotten with its transport.
        self.connections = 0
        self._connection_of: weakref.WeakKeyDictionary[asyncio.BaseTransport, int] = weakref.WeakKeyDictionary()
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

    def set_post_pace(self, per_second: float, burst: int) -> None:
        """Slack's per-channel chat.postMessage bucket (1 a second, bursts of a few) at ``per_second``: Slack's
        pace sped up, so a test of many messages stays short (the outbox's bot/slack/pace.py scaled alike)."""
        self.rate_limits.set_post_pace(per_second, burst)

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

    def _connection(self, request: web.Request) -> int:
        """The number of the TCP connection ``request`` came over (``connections`` counts them)."""
        transport = request.transport
        if transport is None:  # closed under the request: counted when it was opened
            return 0
        if transport not in self._connection_of:
            self.connections += 1
            self._connection_of[transport] = self.connections
        return self._connection_of[transport]

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        connection = self._connection(request)
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
        self.calls.append(Call(method, args, at, token, status, body, connection))
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

