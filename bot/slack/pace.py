"""How fast one channel's outbox posts: Slack takes about one message a second in a channel, with short bursts
(chat.postMessage's "special" limit); a 429 (another replica posting there too) slows this one down."""

from __future__ import annotations

# Slack's per-channel pace. Slack names no burst size: a small one, so a thread's first replies go at once.
POST_PER_S = 1.0
POST_BURST = 3
# After each 429 this outbox takes half its share of the pace (two replicas posting in one channel settle near
# half each), down to SLOWEST_SHARE; each message Slack takes gives back RECOVER_SHARE of it.
SLOWEST_SHARE = 1 / 8
RECOVER_SHARE = 1 / 16


class Pace:
    """A token bucket, charged when a call ends (Slack saw it by then, so Slack's own clock sees at least the gaps
    this one counts) and emptied by a 429 until its Retry-After has passed."""

    def __init__(self) -> None:
        self.share = 1.0
        self._tokens = float(POST_BURST)
        self._at: float | None = None
        self._held_until = 0.0

    def _refill(self, now: float) -> None:
        if self._at is not None:
            self._tokens = min(float(POST_BURST), self._tokens + (now - self._at) * POST_PER_S * self.share)
        self._at = now

    def wait_s(self, now: float) -> float:
        """Seconds until the next call may start (0: now)."""
        if now < self._held_until:
            return self._held_until - now
        self._refill(now)
        return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / (POST_PER_S * self.share)

    def sent(self, now: float) -> None:
        """A call ended (taken or refused: Slack counted it)."""
        self._refill(now)
        self._tokens -= 1.0

    def taken(self) -> None:
        self.share = min(1.0, self.share + RECOVER_SHARE)

    def limited(self, until: float) -> None:
        """Slack said to wait: nothing goes before ``until``, then one message, and the next at a slower pace."""
        self.share = max(SLOWEST_SHARE, self.share / 2)
        self._held_until = max(self._held_until, until)
        self._tokens, self._at = 1.0, self._held_until
