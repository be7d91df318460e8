"""The Slack Web API client every message leaves through: its payloads are redacted on the way out.

Renderers already show redacted evidence and plans; this is the last gate, so a message
path that quotes something raw (an error text, a new renderer) still cannot post a
secret. Large payloads are redacted in a worker thread so acks stay within Slack's 3 s.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from commands.redact import OFF_LOOP_CHARS, redact_data, redact_off_loop


class RedactingWebClient(AsyncWebClient):
    """``AsyncWebClient`` whose text, blocks and uploaded file contents are masked before sending."""

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        for name in ("json", "params", "data"):
            payload = kwargs.get(name)
            if isinstance(payload, dict):
                kwargs[name] = (await asyncio.to_thread(redact_data, payload) if _large(payload)
                                else redact_data(payload))
        return await super().api_call(api_method, **kwargs)

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


def _large(payload: dict[str, Any]) -> bool:
    return len(repr(payload)) >= OFF_LOOP_CHARS
