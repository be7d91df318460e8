"""What the fake sends to the app and judges coming back: slash commands, clicks and events over HTTP or
Socket Mode, each ack against Slack's 3 s deadline and its body, and response_url posts: a mixin of `FakeSlack`."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import WSMsgType, web

from .blockkit import validate_view
from .records import (
    BOT_ID,
    BOT_USER_ID,
    EVENT_SCOPES,
    JSON,
    RESPONSE_URL_LIFETIME_SECONDS,
    RESPONSE_URL_MAX_USES,
    HttpAck,
    OpenView,
    PendingAck,
    ResponsePost,
    SlackError,
    SocketAck,
)
from .signing import (
    API_APP_ID,
    TEAM_DOMAIN,
    TEAM_ID,
    VERIFICATION_TOKEN,
    block_actions_body,
    sign,
    slash_command_payload,
)


class Delivery:
    """Delivering to the app and judging its acks; the response_url and Socket Mode endpoints."""

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

    async def deliver(self, url: str, body: bytes, *, timeout: float = 30.0,  # noqa: ASYNC109
                      retry: int | None = None) -> HttpAck:
        """POST a slash command or interaction (form `body`, see `signing`) to the app's
        Request URL, signed with `signing_secret`, as Slack does; the ack is judged by
        `_check_ack`, recorded in `http_acks` and returned. ``retry``: Slack delivering it again, with its
        ``X-Slack-Retry-Num`` and ``X-Slack-Retry-Reason`` headers."""
        form = parse_qs(body.decode())
        if "payload" in form:
            kind = str(json.loads(form["payload"][0]).get("type"))
        elif "command" in form:
            kind = "slash_commands"
            channel = self._check_command_source(form.get("channel_id", [""])[0])
            channel.members.update(form.get("user_id", [])[:1])
        else:
            raise ValueError("neither a slash command nor an interaction payload")
        return await self._post_to_app(url, body, "application/x-www-form-urlencoded", kind, timeout, retry)

    async def _post_to_app(self, url: str, body: bytes, content_type: str, kind: str,
                           timeout: float, retry: int | None = None) -> HttpAck:  # noqa: ASYNC109
        headers = {"Content-Type": content_type, **sign(body, self.signing_secret)}
        if retry is not None:
            headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
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
