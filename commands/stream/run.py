"""The stream's loop: for each target, the events after its cursor in bounded batches, sent, then the cursor
moved on disk; a failed send waits (exponential backoff with jitter, capped) and resends the same events, so a
receiver sees every event at least once and a repeat carries the same ``seq`` and ``hash``. ``once``: stop when
every target has caught up, or give up after ``give_up_s`` of failures."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any

from commands.errors import ProofbotError
from commands.redact import redact
from commands.store.db import AuditStore
from commands.stream.cursor import Cursor, StreamState
from commands.stream.reader import events_after, hash_at
from commands.stream.targets import DeliveryFailed, Target
from commands.stream.wire import wire_event

log = logging.getLogger(__name__)
BATCH_EVENTS = 200
BATCH_BYTES = 1 << 20  # one POST or one syslog write carries at most this much (a bigger event goes alone)
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0


class CursorMismatch(ProofbotError):
    """The event a target acknowledged is not in this log any more (another database, or a rewritten log)."""

    exit_code = 3


class Undelivered(ProofbotError):
    exit_code = 3


@dataclass
class Delivery:
    """One target's progress in this run."""

    target: Target
    cursor: Cursor
    failures: int = 0
    not_before: float = 0.0
    sent: int = 0
    last_error: str = ""
    caught_up: bool = field(default=False)


@dataclass(frozen=True)
class Settings:
    once: bool = False
    batch_events: int = BATCH_EVENTS
    batch_bytes: int = BATCH_BYTES
    poll_s: float = 1.0
    give_up_s: float = 60.0  # once: how long failures may go on before it exits 3


async def stream(store: AuditStore, targets: list[Target], state: StreamState, settings: Settings) -> dict[str, int]:
    """Run until caught up (``once``) or cancelled; returns how many events each target took in this run."""
    deliveries = [Delivery(target, state.cursor(target.name)) for target in targets]
    for delivery in deliveries:
        await _check_cursor(store, delivery)
    started = time.monotonic()
    while True:
        for delivery in deliveries:
            if time.monotonic() >= delivery.not_before:
                await _step(store, state, delivery, settings)
        if settings.once and all(d.caught_up for d in deliveries):
            return {d.target.name: d.sent for d in deliveries}
        failing = [d for d in deliveries if d.failures]
        if settings.once and failing and time.monotonic() - started > settings.give_up_s:
            worst = failing[0]
            raise Undelivered(f"{redact(worst.target.name)} did not take the events after seq {worst.cursor.seq} "
                              f"within {settings.give_up_s:g} s: {worst.last_error}",
                              hint="the cursor stays where it was: run it again when the receiver is back")
        busy = any(not d.caught_up and not d.failures for d in deliveries)
        if not busy:
            wake = min([d.not_before for d in deliveries if d.failures] or [time.monotonic() + settings.poll_s])
            await asyncio.sleep(max(0.0, min(wake - time.monotonic(), settings.poll_s)))


async def _check_cursor(store: AuditStore, delivery: Delivery) -> None:
    cursor = delivery.cursor
    if cursor.seq and await hash_at(store, cursor.seq) != cursor.hash:
        raise CursorMismatch(f"the state says {redact(delivery.target.name)} took the events up to seq {cursor.seq} "
                             f"(hash {str(cursor.hash)[:12]}…), but this log's event {cursor.seq} is not that event",
                             hint="another database, or the log was rewritten: check it with `proofbot audit "
                                  "verify`; a new --state starts from the first event")


async def _step(store: AuditStore, state: StreamState, delivery: Delivery, settings: Settings) -> None:
    events = await events_after(store, delivery.cursor.seq, settings.batch_events)
    if not events:
        delivery.caught_up = True
        return
    batch: list[dict[str, Any]] = []
    size = 0
    for event in events:
        wired = wire_event(event)
        size += len(json.dumps(wired, ensure_ascii=False).encode())
        if batch and size > settings.batch_bytes:
            break
        batch.append(wired)
    try:
        await delivery.target.send(batch)
    except DeliveryFailed as exc:
        delivery.failures += 1
        delivery.last_error = str(exc)
        pause = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (delivery.failures - 1)) * random.uniform(0.5, 1.0)
        delivery.not_before = time.monotonic() + pause
        delivery.caught_up = False
        log.warning("audit stream: %s refused seq %d..%d (%s); again in %.1f s", redact(delivery.target.name),
                    batch[0]["seq"], batch[-1]["seq"], exc, pause)
        return
    last = batch[-1]
    delivery.cursor = Cursor(int(last["seq"]), str(last["hash"]))
    state.acknowledged(delivery.target.name, delivery.cursor)
    delivery.failures, delivery.sent = 0, delivery.sent + len(batch)
    delivery.caught_up = len(batch) == len(events) and len(events) < settings.batch_events
