"""Tier 1: an open App Home follows the watch, not only operations: a watch run that changes what the Home shows (a
host "changing", failing) or a restart taking a host's lock is published again without any operation ending;
bounded per user and for every user together (views.publish's tier). Runs are recorded results (no SSH) written
by the watch's own audit writer, as serve's watch writes them; the Home is opened through the real bolt app and
the strict fake Slack."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.slack.home import HOME_PUBLISHES_PER_MINUTE, HomeState
from commands.operation import Origin, new_operation_id
from commands.store.log import audit_log
from commands.vocabulary import Operation
from commands.watch.audit import WatchAudit
from commands.watch.schedule import Watch
from tests.test_slack_home import ALICE, CHANNEL, home_rig
from tests.test_watch_home import _nothing
from tests.watch_rig import RecordedFleet, SimulatedClock

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def test_a_watch_run_shows_on_an_open_home_without_an_operation_ending(tmp_path: Path) -> None:
    document: dict[str, Any] = {"hosts": {"gpu1": {"address": "127.0.0.1", "port": 9}},
                                "watch": [{"target": "gpu1", "every": "5m", "channel": CHANNEL, "jitter": "0s"}]}
    async with home_rig(tmp_path, document) as rig:
        inventory, audit = rig.context.inventory, rig.context.audit
        assert "*gpu1* not yet watched" in str(await rig.open_home(ALICE))
        published = len(rig.slack.calls_to("views.publish"))
        watch = Watch(inventory.watch, RecordedFleet(["gpu1"], lambda run: {"gpu1"} if run >= 1 else set()),
                      _nothing, clock=SimulatedClock(START),
                      on_run=WatchAudit(audit, inventory, Origin("proofbot:watch", "slack")).record)
        await watch.run_once()  # one run: passing (no change: nothing said)
        await rig.slack.wait_for("views.publish", published + 1, timeout=30)
        await rig.slack.wait_until(lambda: "*gpu1* passing since" in rig.home_text(), timeout=30,
                                   what="the first run on the Home")
        await watch.run_once()  # failing once: "changing", said after 2
        await rig.slack.wait_until(lambda: "FAIL in the last 1 run (said after 2)" in rig.home_text(), timeout=30,
                                   what="the host changing on the Home")
        await watch.run_once()  # failing twice: confirmed
        await rig.slack.wait_until(lambda: "*gpu1* failing since" in rig.home_text(), timeout=30,
                                   what="the host failing on the Home")
        # a restart taking the host's lock (asked for from the CLI on the same database): shown while it runs
        await audit_log(audit, Operation.RESTART, new_operation_id(), "gpu1", "ops@laptop").requested(
            Origin.local_user())
        await rig.slack.wait_until(lambda: "*IN PROGRESS* (restart" in rig.home_text(), timeout=30,
                                   what="the restart in progress on the Home")


def test_every_users_publishes_together_stay_within_the_tier() -> None:
    home = HomeState()
    assert home.budget(100.0) == HOME_PUBLISHES_PER_MINUTE
    home.published.extend([100.0] * HOME_PUBLISHES_PER_MINUTE)
    assert home.budget(100.0) == 0 and home.budget(159.9) == 0  # the rest wait: a sliding minute
    assert home.budget(160.0) == HOME_PUBLISHES_PER_MINUTE
