"""The delivery claims that keep a Slack retry from starting anything twice: which deliveries are keyed and how
(pure), and the claim itself on both backends (a second claim of one id loses; old claims are let go)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

from bot.slack.once import delivery_id
from commands.store.db import AuditStore
from commands.store.deliveries import KEEP_S, claim, claim_in
from tests.slack_fake.signing import slash_command_body


def command(trigger: str) -> dict[str, str]:
    form = parse_qs(slash_command_body("/verify", "ct129", "U1", "C1", "https://hooks.example/r/1", trigger).decode())
    return {key: values[0] for key, values in form.items()}


def test_a_delivery_is_keyed_by_its_event_id_or_its_whole_payload() -> None:
    assert delivery_id({"type": "event_callback", "event_id": "Ev1", "event": {}}) == ("event", "event:Ev1")
    first, again, other = command("1.T.a"), command("1.T.a"), command("2.T.b")
    assert delivery_id(first) == delivery_id(again) and delivery_id(first) != delivery_id(other)
    assert delivery_id(first)[0] == "command"  # type: ignore[index]
    click = {"type": "block_actions", "trigger_id": "3.T.c", "actions": [{"action_id": "restore_approve"}]}
    assert delivery_id(click) == delivery_id(json.loads(json.dumps(click)))
    assert delivery_id({"type": "url_verification", "challenge": "x"}) is None, "nothing to start: not claimed"
    assert delivery_id({"type": "block_suggestion"}) is None


async def test_a_delivery_is_claimed_once(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    try:
        assert await claim(store, "event:Ev1", "event") is True
        assert await claim(store, "event:Ev1", "event") is False, "a retry finds the claim"
        assert await claim(store, "event:Ev2", "event") is True
        later = await store.write(lambda db: claim_in(db, "event:Ev1", "event", now=10**10))
        assert later is True, f"a claim older than {KEEP_S:g} s is let go"
    finally:
        store.close()
