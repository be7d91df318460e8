"""The Slack Web API client every message leaves through: its payloads are redacted on the way out.

Renderers already show redacted evidence and plans; this is the last gate, so a message
path that quotes something raw (an error text, a new renderer) still cannot post a
secret. Large payloads are redacted in a worker thread so acks stay within Slack's 3 s.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.metrics import slack_failed
from commands.redact import OFF_LOOP_CHARS, redact_data, redact_off_loop

# Every argument of every Web API call is masked (text, blocks, a modal's or the App Home's view,
# file titles, topics…) but these, Slack's own plumbing that must go out byte for byte:
# apps.connections.open carries the app token as ``token``; the rest are ids and a view's hash.
PLUMBING = frozenset({"token", "channel", "ts", "thread_ts", "trigger_id", "interactivity_pointer", "view_id",
                      "external_id", "hash", "user", "user_id", "users", "file", "file_id", "cursor", "limit"})


class RedactingWebClient(AsyncWebClient):
    """``AsyncWebClient`` whose every call (``views.*`` included) and uploaded file contents are masked
    before sending."""

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        for name in ("json", "params", "data"):
            payload = kwargs.get(name)
            if isinstance(payload, dict):
                content = {key: value for key, value in payload.items() if key not in PLUMBING}
                masked = await asyncio.to_thread(_masked, content) if _large(content) else _masked(content)
                kwargs[name] = {**payload, **masked}
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            slack_failed(api_method, str(exc.response.get("error") or f"http-{exc.response.status_code}"))
            raise
        except (aiohttp.ClientError, TimeoutError) as exc:  # Slack not reached (after the connection retries)
            slack_failed(api_method, "timeout" if isinstance(exc, TimeoutError) else "unreachable")
            raise

    @classmethod
    def like(cls, client: AsyncWebClient) -> RedactingWebClient:
        """A redacting copy of ``client``: bolt (1.15+) hands each listener a new plain AsyncWebClient
        made from the app's settings, so the app's own redacting client alone would be bypassed."""
        if isinstance(client, RedactingWebClient):
            return client
        redacting = cls(token=client.token, base_url=client.base_url, timeout=client.timeout, ssl=client.ssl,
                        proxy=client.proxy, session=client.session,
                        trust_env_in_session=client.trust_env_in_session, headers=client.headers,
                        logger=client.logger, retry_handlers=client.retry_handlers)
        redacting.default_params = dict(client.default_params)  # team_id, when bolt set one
        return redacting

    async def files_upload_v2(self, **kwargs: Any) -> AsyncSlackResponse:
        # The content goes to an upload URL outside api_call: mask it here.
        content = kwargs.get("content")
        if isinstance(content, bytes):
            content = content.decode("utf-8", errors="replace")
        if isinstance(content, str):
            kwargs["content"] = await redact_off_loop(content)
        for name in ("initial_comment", "title", "filename"):
            if isinstance(kwargs.get(name), str):
                kwargs[name] = redact_data(kwargs[name])
        return await super().files_upload_v2(**kwargs)


def _masked(content: dict[str, Any]) -> dict[str, Any]:
    """``redact_data``, with JSON sent as a string (a view or blocks in form data, ``files`` of
    files.completeUploadExternal) parsed first and dumped again, so masking never breaks its syntax."""
    masked: dict[str, Any] = {}
    for key, value in content.items():
        parsed = _json_container(value)
        masked[key] = json.dumps(redact_data(parsed)) if parsed is not None else redact_data({key: value})[key]
    return masked


def _json_container(value: Any) -> Any:
    if not isinstance(value, str) or value[:1] not in ("{", "["):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _large(payload: dict[str, Any]) -> bool:  # a rough size: the repr costs far less than the regexes
    return len(repr(payload)) >= OFF_LOOP_CHARS
