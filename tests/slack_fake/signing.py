"""Helpers to build signed Slack HTTP-mode requests (v0 HMAC-SHA256 signatures, form bodies).

See https://docs.slack.dev/authentication/verifying-requests-from-slack/ for the scheme.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

TEAM_ID = "T0TEST"
TEAM_DOMAIN = "fake-team"
API_APP_ID = "A0TEST"
VERIFICATION_TOKEN = "fake-verification-token"


def signature(body: bytes, secret: str, timestamp: int) -> str:
    """Return the `v0=<hex>` signature Slack computes over `v0:<timestamp>:<body>`."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Return the `X-Slack-Request-Timestamp` / `X-Slack-Signature` headers for `body`."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": signature(body, secret, ts),
    }


def slash_command_payload(
    command: str,
    text: str,
    user_id: str,
    channel_id: str,
    response_url: str,
    trigger_id: str,
    *,
    user_name: str = "tester",
    channel_name: str = "general",
    team_id: str = TEAM_ID,
) -> dict[str, str]:
    """Return the fields Slack sends for a slash command (all values are strings)."""
    if not command.startswith("/"):
        raise ValueError(f"slash commands start with '/': {command!r}")
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": team_id,
        "team_domain": TEAM_DOMAIN,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": API_APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def slash_command_body(
    command: str,
    text: str,
    user_id: str,
    channel_id: str,
    response_url: str,
    trigger_id: str,
    *,
    user_name: str = "tester",
    channel_name: str = "general",
    team_id: str = TEAM_ID,
) -> bytes:
    """Return the `application/x-www-form-urlencoded` body Slack POSTs for a slash command."""
    payload = slash_command_payload(
        command,
        text,
        user_id,
        channel_id,
        response_url,
        trigger_id,
        user_name=user_name,
        channel_name=channel_name,
        team_id=team_id,
    )
    return urlencode(payload).encode()


def block_actions_body(payload: dict[str, Any]) -> bytes:
    """Return the form body Slack POSTs for interactivity: `payload=<url-encoded JSON>`."""
    return urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()


FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
