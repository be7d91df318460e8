"""Slack's documented Web API rate limits, applied by the fake by default (HTTP 429 + Retry-After).

Sources (docs.slack.dev / api.slack.com "Rate limits" and each method's page): limits apply per
method, per app, per workspace; Tier 1 is 1+ calls a minute, Tier 2 20+, Tier 3 50+, Tier 4 100+;
chat.postMessage is "special": about one message a second per channel, short bursts allowed.
The fake uses each tier's documented floor (Slack may allow more, never less), so code that
passes here stays inside Slack's promise. Where Slack gives no number the fake picks one and
says so here (the deliberate differences):

- chat.postMessage: a token bucket per channel, 1 a second, a burst of POST_BURST messages. Slack
  names no burst size, and its workspace-wide cap on chat.postMessage has no published number: the
  fake has none.
- A tier's "N per minute" is a sliding 60 s window of N calls (so a burst of N is allowed, as the
  docs' "bursts are welcome" suggests); Slack's real accounting is not published.
- chat.getPermalink and auth.test are "special" with no published figure: not limited here.
- apps.connections.open: api.slack.com says Tier 1, the newer docs.slack.dev method data Tier 3;
  the fake takes Tier 1 with a small burst (CONNECT_BURST), as Tier 1 "tolerates a small burst".
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

TIER_PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
METHOD_TIERS = {
    "chat.update": 3,
    "chat.postEphemeral": 4,
    "views.open": 4,
    "views.publish": 4,
    "files.getUploadURLExternal": 4,
    "files.completeUploadExternal": 4,
    "apps.connections.open": 1,
    "conversations.history": 1,  # Tier 3 for Marketplace apps; 1 a minute for the others since 2025
}
POST_PER_SECOND = 1.0
POST_BURST = 5
CONNECT_BURST = 3


@dataclass
class Window:
    """At most `max_calls` accepted in any `per_seconds` window."""

    max_calls: int
    per_seconds: float
    accepted: deque[float] = field(default_factory=deque)

    def retry_after(self, at: float) -> int | None:
        """None: accepted (and counted). Else the whole seconds Slack would put in Retry-After."""
        while self.accepted and at - self.accepted[0] >= self.per_seconds:
            self.accepted.popleft()
        if len(self.accepted) >= self.max_calls:
            return max(1, math.ceil(self.per_seconds - (at - self.accepted[0])))
        self.accepted.append(at)
        return None


@dataclass
class Bucket:
    """A token bucket: `burst` calls at once, refilled at `rate` a second."""

    rate: float
    burst: int
    tokens: float = -1.0
    last: float = 0.0

    def retry_after(self, at: float) -> int | None:
        if self.tokens < 0:
            self.tokens, self.last = float(self.burst), at
        self.tokens = min(float(self.burst), self.tokens + (at - self.last) * self.rate)
        self.last = at
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - self.tokens) / self.rate))


Limit = Window | Bucket


class RateLimits:
    """Slack's limits by default; `set` overrides one method (per channel for chat.postMessage)."""

    def __init__(self) -> None:
        self._custom: dict[str, tuple[int, float]] = {}
        self._post = (POST_PER_SECOND, POST_BURST)
        self._state: dict[tuple[str, str], Limit] = {}
        self.enabled = True

    def set(self, method: str, max_calls: int, per_seconds: float) -> None:
        self._custom[method] = (max_calls, per_seconds)
        self._state = {key: limit for key, limit in self._state.items() if key[0] != method}

    def set_post_pace(self, per_second: float, burst: int) -> None:
        """chat.postMessage's per-channel bucket at another rate (a test's Slack, sped up in time)."""
        self._post = (per_second, burst)
        self._state = {key: limit for key, limit in self._state.items() if key[0] != "chat.postMessage"}

    def retry_after(self, method: str, channel: str | None, at: float) -> int | None:
        """None when Slack would take this call now, else the Retry-After seconds of its 429."""
        if not self.enabled:
            return None
        key = (method, (channel or "") if method == "chat.postMessage" else "")
        limit = self._state.get(key)
        if limit is None:
            limit = self._new(method)
            if limit is None:
                return None
            self._state[key] = limit
        return limit.retry_after(at)

    def _new(self, method: str) -> Limit | None:
        if method in self._custom:
            return Window(*self._custom[method])
        if method == "chat.postMessage":
            return Bucket(*self._post)
        tier = METHOD_TIERS.get(method)
        if tier is None:
            return None
        if method == "apps.connections.open":
            return Bucket(TIER_PER_MINUTE[tier] / 60.0, CONNECT_BURST)
        return Window(TIER_PER_MINUTE[tier], 60.0)
