"""An audit event as a SIEM receives it: the JSON object the webhook posts and syslog carries, with what a
receiver needs to recompute its hash and follow the chain (docs/observability.md "Recompute the hash").

The recipe: drop ``seq`` and ``hash`` from the object; serialise the rest as JSON with keys sorted, no
whitespace (``","`` and ``":"``), non-ASCII as UTF-8 (not ``\\u`` escapes); sha-256 of those bytes in lower
hex is ``hash``. ``prev_hash`` is the hash of the event before (64 zeros for the first): a receiver that
checks it on every event it keeps knows nothing was left out, whatever the ``seq`` numbers.
"""

from __future__ import annotations

from typing import Any

from commands.store.events import Event

HASHED = ("at", "operation_id", "operation", "host", "kind", "actor", "details", "prev_hash")


def wire_event(event: Event) -> dict[str, Any]:
    """``seq``, ``hash`` and exactly the fields the hash covers."""
    return {"seq": event.id, "hash": event.hash, **{name: getattr(event, name) for name in HASHED}}
