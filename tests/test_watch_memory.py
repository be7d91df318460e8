"""Tier 1: the watch's state survives a restart, read back from the real audit store alone: a known failure is
not said again, a run of results not yet confirmed is not forgotten, and the quiet hours' digest still goes out
once, after a restart in the middle of the night; on SQLite and on PostgreSQL. Verifies are recorded results
(no SSH): what is tested is what the log keeps and what a fresh watch makes of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from commands.inventory import Inventory, parse_inventory
from commands.inventory.watch import WatchEntry
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify.fleet import FleetResult
from commands.vocabulary import Change
from commands.watch.audit import WatchAudit
from commands.watch.memory import remembered, restore_watch
from commands.watch.schedule import Watch
from commands.watch.state import Announcement
from tests.watch_rig import RecordedFleet, SimulatedClock

HOSTS = ["ct1", "ct2", "ct3"]
EVERY = timedelta(minutes=5)
ORIGIN = Origin("proofbot:watch", "slack")


def _inventory(quiet: str | None = None) -> Inventory:
    entry = {"target": "gpu", "every": "5m", "channel": "C0WATCH", "jitter": "0s",
             **({"quiet": quiet} if quiet else {})}
    return parse_inventory(yaml.safe_dump({"hosts": {name: {"address": "127.0.0.1"} for name in HOSTS},
                                           "groups": {"gpu": HOSTS}, "watch": [entry]}), "inv.yml")


async def _watch_for(inventory: Inventory, store: AuditStore, fleet: RecordedFleet, start: datetime, runs: int
                     ) -> list[Announcement]:
    """A fresh watch (as a new serve or cron run starts one), restored from ``store``, run ``runs`` times."""
    said: list[Announcement] = []

    async def post(_entry: WatchEntry, announcement: Announcement, _fleet: FleetResult) -> None:
        said.append(announcement)

    watch = Watch(inventory.watch, fleet, post, clock=SimulatedClock(start),
                  on_run=WatchAudit(store, inventory, ORIGIN).record)
    await restore_watch(watch, store)
    await watch.run_forever(until=start + runs * EVERY)
    return said


def _said(said: list[Announcement]) -> list[tuple[bool, list[tuple[str, str]]]]:
    return [(message.digest, sorted((change.host, str(change.change)) for change in message.changes))
            for message in said]


async def test_a_restart_neither_re_alerts_a_known_failure_nor_forgets_a_pending_one(store_target: Path | str
                                                                                     ) -> None:
    store = AuditStore.open(store_target)
    start = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    try:
        inventory = _inventory()
        # ct1 fails from the first run (said at the 2nd); ct2 fails at the 3rd run: one result, then a restart
        fleet = RecordedFleet(HOSTS, lambda run: {"ct1"} | ({"ct2"} if run >= 2 else set()))
        first = await _watch_for(inventory, store, fleet, start, 3)
        assert _said(first) == [(False, [("ct1", Change.FAILED)])]
        memory = (await remembered(store, ["gpu"]))["gpu"]
        assert memory.pending["ct2"]["streak"] == 1 and memory.watching_since == start
        # the restarted watch: ct1 not said again; ct2's one failure counts, so its second is its alert
        second = await _watch_for(inventory, store, fleet, start + 3 * EVERY, 3)
        assert _said(second) == [(False, [("ct2", Change.FAILED)])]
        assert (await remembered(store, ["gpu"]))["gpu"].watching_since == start  # one watch, restarted
    finally:
        store.close()


async def test_the_digest_is_said_once_after_a_restart_in_the_quiet_hours(store_target: Path | str) -> None:
    store = AuditStore.open(store_target)
    evening = datetime(2026, 12, 1, 20, 50, tzinfo=UTC)  # 21:50 Berlin; quiet 22:00-23:00
    try:
        inventory = _inventory("22:00-23:00 Europe/Berlin")
        # ct3 fails at 22:05 Berlin and recovers at 22:30: held, then the bot restarts at 22:40
        fleet = RecordedFleet(HOSTS, lambda run: {"ct3"} if 3 <= run < 8 else set())
        assert await _watch_for(inventory, store, fleet, evening, 10) == []
        after = await _watch_for(inventory, store, fleet, evening + 10 * EVERY, 6)
        assert _said(after) == [(True, [("ct3", Change.RECOVERED)])]
        (change,) = after[0].changes
        assert [step.change for step in (*change.earlier, change)] == [Change.FAILED, Change.RECOVERED]
        # said once: a later restart finds no digest left to say
        assert (await remembered(store, ["gpu"]))["gpu"].digest == []
        assert await _watch_for(inventory, store, fleet, evening + 16 * EVERY, 3) == []
    finally:
        store.close()
