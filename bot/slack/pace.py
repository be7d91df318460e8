"""How fast one channel's outbox posts: Slack takes about one message a second in a channel, with short bursts
(chat.postMessage's "special" limit, per app and channel); a 429 holds the channel until its Retry-After."""

from __future__ import annotations

# Slack's per-channel pace. Slack names no burst size: a small one, so a thread's first replies go at once.
POST_PER_S = 1.0
POST_BURST = 3


class Pace:
    """A token bucket, charged when a call ends (Slack saw it by then, so Slack's own clock sees at least the gaps
    this one counts) and emptied by a 429 until its Retry-After has passed. Not shared between replicas: another
    replica posting in the channel shows as 429s here, each waited out (docs/slack.md)."""

    def __init__(self) -> None:
        self._tokens = float(POST_BURST)
        self._at: float | None = None
        self._held_until = 0.0

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            self._tokens = min(float(POST_BURST), self._tokens + (now - self._at) * POST_PER_S)
        self._at = now if self._at is None else max(now, self._at)

    def wait_s(self, now: float) -> float:
        """Seconds until the next call may start (0: now)."""
        if now < self._held_until:
            return self._held_until - now
        self._refill(now)
        return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / POST_PER_S

    def sent(self, now: float) -> None:
        """A call ended (taken or refused: Slack counted it)."""
        self._refill(now)
        self._tokens -= 1.0

    def limited(self, until: float) -> None:
        """Slack said to wait: nothing goes before ``until``, then the same message."""
        self._held_until = max(self._held_until, until)
        self._tokens, self._at = 1.0, self._held_until
