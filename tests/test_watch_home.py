"""Tier 1: the App Home shows each watched host's current state and since when, as the audit log holds it (so a
restarted bot or a cron's ``--once`` shows too): the hosts not passing first, 500 hosts within Slack's 100 blocks
(counts per state, "and N more"), each entry only to members of its channel. Runs are recorded results (no SSH)
written by the watch's own audit writer; the Home is opened through the real bolt app and the strict fake Slack."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from bot.slack.home_watch import host_lines
from commands.inventory import Inventory, parse_inventory
from commands.inventory.watch import WatchEntry
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify.fleet import FleetResult
from commands.watch.audit import WatchAudit
from commands.watch.memory import remembered
from commands.watch.schedule import Watch
from commands.watch.state import Announcement
from tests.test_slack_home import ALICE, BOB, CHANNEL, home_rig
from tests.watch_rig import RecordedFleet, SimulatedClock

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EVERY = timedelta(minutes=5)
SECRET_CHANNEL = "C0SECRET"  # Bob's only


async def _nothing(_entry: WatchEntry, _announcement: Announcement, _fleet: FleetResult) -> None:
    """What is posted is not what these tests are about."""


async def _watched(inventory: Inventory, audit: AuditStore, fleet: RecordedFleet, runs: int) -> None:
    watch = Watch(inventory.watch, fleet, _nothing, clock=SimulatedClock(START),
                  on_run=WatchAudit(audit, inventory, Origin("proofbot:watch", "slack")).record)
    await watch.run_forever(until=START + runs * EVERY)


def _sections(view: dict[str, Any]) -> str:
    return json.dumps(view["blocks"], ensure_ascii=False)


async def test_500_watched_hosts_fit_the_home_failing_first_each_entry_to_its_channels_members(
        tmp_path: Path) -> None:
    hosts = [f"gpu{n:03d}" for n in range(500)]
    failing = set(hosts[::5])  # 100 fail from the third run on; gpu001 fails once more at the last run (pending)
    document: dict[str, Any] = {
        "hosts": {name: {"address": "127.0.0.1", "port": 9} for name in [*hosts, "ct1"]},
        # 100 racks: the last verdicts alone would fill the Home; the watch's room is kept from them
        "groups": {"fleet": hosts, "east": ["ct1"], **{f"rack{n:02d}": hosts[n * 5:n * 5 + 5] for n in range(100)}},
        "watch": [{"target": "fleet", "every": "5m", "channel": CHANNEL, "jitter": "0s"},
                  {"target": "east", "every": "5m", "channel": SECRET_CHANNEL, "jitter": "0s"}]}
    async with home_rig(tmp_path, document, ((SECRET_CHANNEL, "secret", (BOB,)),)) as rig:
        inventory, audit = rig.context.inventory, rig.context.audit
        fleet = RecordedFleet({"fleet": hosts, "east": ["ct1"]},
                              lambda run: (failing if run >= 2 else set()) | ({"gpu001"} if run == 4 else set()))
        await _watched(inventory, audit, fleet, 5)
        view = await rig.open_home(ALICE)  # the fake refuses a Home view over Slack's limits
        assert len(view["blocks"]) <= 100
        text = _sections(view)
        assert "*fleet* every 5m → <#C0OPS>" in text and "*east* every" not in text  # east posts where Alice is not
        assert "100 failing · 1 changing · 399 passing" in text
        assert "last run <!date^" in text and "399 pass · 101 fail" in text  # the last run as it came back
        watch_at = next(index for index, block in enumerate(view["blocks"])
                        if block.get("text", {}).get("text") == "Watch")
        lines = "\n".join(block["text"]["text"] for block in view["blocks"][watch_at + 2:]
                          if block["type"] == "section")
        failing_lines = re.findall(r"\*(gpu\d+)\* failing since <!date\^(\d+)\^", lines)
        assert sorted(host for host, _ in failing_lines) == sorted(failing)  # every failing host is named
        assert {int(epoch) for _, epoch in failing_lines} == {int((START + 2 * EVERY).timestamp())}
        assert "*gpu001* passing since" in lines and "FAIL in the last 1 run (said after 2)" in lines
        assert "*gpu002*" not in lines  # passing hosts past ten are counted, not named
        assert "… and 399 passing: `/verify fleet` shows each of them" in text
        # Bob, in the other channel only, sees that entry and not this one
        bob = _sections(await rig.open_home(BOB))
        assert "*east* every 5m → <#C0SECRET>" in bob and "*fleet* every" not in bob


async def test_each_host_says_its_state_and_since_when_the_most_urgent_first(tmp_path: Path) -> None:
    inventory = parse_inventory(yaml.safe_dump({
        "hosts": {name: {"address": "127.0.0.1"} for name in ("ct1", "ct2", "ct3")}, "groups": {"gpu": ["ct1", "ct2",
                                                                                                         "ct3"]},
        "watch": [{"target": "gpu", "every": "5m", "channel": "C0WATCH", "jitter": "0s"}]}), "inv.yml")
    store = AuditStore.open(tmp_path / "audit.db")
    try:
        (entry,) = inventory.watch
        assert [line.text for line in host_lines(entry, ["ct1"], (await remembered(store, ["gpu"]))["gpu"])] == [
            "*ct1* not yet watched"]
        # ct3 fails from the 2nd run (said at the 3rd); ct2 fails at the 3rd and recovers at the 5th; ct1 passes
        fleet = RecordedFleet(["ct1", "ct2", "ct3"], lambda run: {"ct3"} | ({"ct2"} if run in (2, 3) else set())
                              if run >= 1 else set())
        await _watched(inventory, store, fleet, 7)
        memory = (await remembered(store, ["gpu"]))["gpu"]
    finally:
        store.close()
    lines = [line.text for line in host_lines(entry, ["ct1", "ct2", "ct3"], memory)]
    epoch = {n: int((START + n * EVERY).timestamp()) for n in range(7)}
    assert [re.sub(r"\|[^>]*>", ">", line) for line in lines] == [
        f"*ct3* failing since <!date^{epoch[1]}^{{date_short_pretty}} {{time_secs}}>: `file:spec_info.py`",
        f"*ct1* passing since <!date^{epoch[0]}^{{date_short_pretty}} {{time_secs}}>",
        f"*ct2* passing since <!date^{epoch[4]}^{{date_short_pretty}} {{time_secs}}>"]
