"""The fake's Web API methods, each as Slack answers it (chat, files.uploadV2's two calls and the upload,
views, conversations.members, apps.connections.open): a mixin of `FakeSlack`."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from aiohttp import BodyPartReader, web

from .blockkit import validate_blocks, validate_view
from .records import (
    BOT_ID,
    BOT_USER_ID,
    BOT_USER_NAME,
    JSON,
    MAX_MESSAGE_TEXT,
    PERMALINK_BASE,
    TEAM_NAME,
    TRIGGER_LIFETIME_SECONDS,
    USER_ID_RE,
    Channel,
    Ephemeral,
    HomePublish,
    Message,
    MessageEdit,
    OpenView,
    SlackError,
    UploadedFile,
    _Content,
    _invalid_arguments,
    _json_value,
    _opt_str,
)
from .signing import (
    API_APP_ID,
    TEAM_ID,
)


class WebApiMethods:
    """The Web API methods `FakeSlack._methods` dispatches to, and the upload endpoint."""

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
        msg = Message(channel, ts, content.text, content.blocks, thread_ts, time.monotonic(),
                      metadata=_metadata(args.get("metadata")), posted_epoch=time.time())
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

    def _conversations_history(self, args: JSON) -> JSON:
        """The channel's top-level messages, newest first, posted within ``oldest``/``latest`` (exclusive; the
        wall-clock time of the post, which Slack's ts is and the fake's is not); ``limit``
        at most HISTORY_LIMIT (Slack's cap for apps outside the Marketplace since 2025); ``metadata`` only with
        ``include_all_metadata``; channels:history or groups:history by its type."""
        ch = self._visible_channel(args.get("channel"))
        self._require_scope("groups:history" if ch.is_private else "channels:history", self.scopes)
        limit = int(args.get("limit") or HISTORY_LIMIT)
        if not 1 <= limit <= 1000:
            raise SlackError("invalid_limit")
        oldest, latest = float(args.get("oldest") or 0), float(args.get("latest") or "inf")
        found = sorted((m for m in self.messages.values() if m.channel == ch.id and not m.is_reply
                        and oldest < m.posted_epoch < latest), key=lambda m: float(m.ts), reverse=True)
        start = int(_opt_str(args.get("cursor")) or 0)
        shown = found[start:start + min(limit, HISTORY_LIMIT)]
        with_metadata = str(args.get("include_all_metadata")).lower() in ("true", "1")
        messages = [{k: v for k, v in m.as_dict().items() if with_metadata or k != "metadata"} for m in shown]
        more = start + len(shown) < len(found)
        return {"messages": messages, "has_more": more,
                "response_metadata": {"next_cursor": str(start + len(shown)) if more else ""}}

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
        self._connection(request)
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


HISTORY_LIMIT = 15  # conversations.history's most messages a call for apps outside the Marketplace (2025)


def _metadata(raw: Any) -> JSON | None:
    """chat.postMessage's ``metadata``: ``event_type`` (letters, digits, underscores) and an ``event_payload``
    object; anything else is refused as Slack refuses it."""
    value = _json_value(raw, "invalid_metadata_format")
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("event_payload"), dict) or not re.fullmatch(
            r"[A-Za-z0-9_]{1,255}", str(value.get("event_type") or "")):
        raise SlackError("invalid_metadata_format")
    return {"event_type": value["event_type"], "event_payload": value["event_payload"]}
