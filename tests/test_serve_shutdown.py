"""Tier 1: a real ``proofbot serve`` stopped by SIGTERM mid-request stops cleanly: the in-flight listener is drained
(its verdict posted, its operation finished in the log) before the store closes, a listener past the drain
deadline is cancelled (told interrupted by the next serve), and the bot exits 0 with no traceback."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from bot.demo.host import DemoHost
from tests.conftest import write_inventory
from tests.fleet_rig import fleet_entry, proxied_known_hosts
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import slash_command_body
from tests.test_serve_live_holders import SECRET, free_port, kinds, start_serve

CHANNEL, ALICE = "C0OPS", "U0ALICE"


async def _stopped_mid_verify(clean_host: DemoHost, tmp_path: Path, *, blackhole: bool) -> tuple[FakeSlack, Path, str]:
    """serve, a /verify whose host answers slowly (or never), SIGTERM once its thread is posted: serve's stderr."""
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy, \
            FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        known = proxied_known_hosts(clean_host, proxy.port, tmp_path / "known_hosts")
        document = clean_host.inventory()
        document["ssh"]["connect_timeout_s"] = 120
        document["hosts"] = {"h1": fleet_entry(clean_host, proxy.port, known)}
        inventory = write_inventory(tmp_path / "inventory.yml", document)
        db = tmp_path / "audit.db"
        bot = await start_serve(slack, inventory, db, port := await free_port())
        try:
            await until("the bot to start", lambda: db.exists() and "bot-started" in kinds(db), 30)
            if blackhole:
                proxy.blackhole()
            else:
                proxy.set_delay(0.03)  # each chunk a little late: a verify that outlasts the SIGTERM
            ack = await slack.deliver(f"http://127.0.0.1:{port}/slack/events",
                                      slash_command_body("/verify", "h1", ALICE, CHANNEL, slack.response_url(), "t1"))
            assert ack.text == ""
            await slack.wait_until(lambda: len(slack.messages_in(CHANNEL)) == 1, what="the verify's parent")
            assert "finished" not in kinds(db)  # mid-request
            bot.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(bot.communicate(), 60)
        finally:
            if bot.returncode is None:
                bot.kill()
                await bot.wait()
        said = err.decode()
        assert bot.returncode == 0, said
        assert "Traceback" not in said and "never retrieved" not in said and "Error" not in said, said
        return slack, db, said


async def test_sigterm_mid_verify_drains_it_then_exits_0_without_a_traceback(clean_host: DemoHost,
                                                                              tmp_path: Path) -> None:
    slack, db, said = await _stopped_mid_verify(clean_host, tmp_path, blackhole=False)
    events = kinds(db)
    assert events.count("finished") == 1 and events[-1] == "bot-stopped", said  # the verify ended, then the bot
    # its thread was told the end: the summary posted after the last check
    assert any(message.text.startswith("Summary of operation") for message in slack.messages_in(CHANNEL))


async def test_sigterm_mid_verify_past_the_drain_deadline_cancels_it_and_exits_0(clean_host: DemoHost,
                                                                                  tmp_path: Path) -> None:
    _, db, said = await _stopped_mid_verify(clean_host, tmp_path, blackhole=True)
    assert "finished" not in kinds(db) and kinds(db)[-1] == "bot-stopped"
    assert "still running after" in said  # the log says what was cut short
