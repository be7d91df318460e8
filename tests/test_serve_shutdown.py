"""Tier 1: a real ``proofbot serve`` stopped by SIGTERM mid-request stops cleanly: requests in flight are drained (a
verify that ends within the drain deadline posts its verdict and finishes in the log) before the store closes, one
past the deadline is cancelled (said in the log; the next serve tells its thread it was interrupted), and the bot
records ``bot-stopped`` last and exits 0 with no traceback."""

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

CHANNEL, ALICE, BOB = "C0OPS", "U0ALICE", "U0BOB"


async def test_sigterm_mid_request_drains_what_ends_in_time_cancels_the_rest_and_exits_0(
        clean_host: DemoHost, tmp_path: Path) -> None:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as slow, \
            DelayProxy("127.0.0.1", clean_host.ssh_port) as dead, \
            FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        document = clean_host.inventory()
        document["ssh"]["connect_timeout_s"] = 120
        document["hosts"] = {name: fleet_entry(clean_host, proxy.port, proxied_known_hosts(
            clean_host, proxy.port, tmp_path / f"known_hosts_{name}")) for name, proxy in (("h1", slow), ("h2", dead))}
        inventory = write_inventory(tmp_path / "inventory.yml", document)
        db = tmp_path / "audit.db"
        bot = await start_serve(slack, inventory, db, port := await free_port())
        try:
            await until("the bot to start", lambda: db.exists() and "bot-started" in kinds(db), 30)
            slow.set_delay(0.03)  # each chunk a little late: a verify that outlasts the SIGTERM, not the drain
            dead.blackhole()  # never answers: still running at the drain deadline
            for host, user in (("h1", ALICE), ("h2", BOB)):
                ack = await slack.deliver(f"http://127.0.0.1:{port}/slack/events", slash_command_body(
                    "/verify", host, user, CHANNEL, slack.response_url(), "t1"))
                assert ack.text == ""
            await slack.wait_until(lambda: len(slack.messages_in(CHANNEL)) == 2, what="both verifies' parents")
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
    events = kinds(db)
    assert events.count("finished") == 1 and events[-1] == "bot-stopped", said  # h1's verify ended, then the bot
    # h1's thread was told the end (the summary after its last check); h2's was cut short, said in the log
    assert sum(message.text.startswith("Summary of operation") for message in slack.messages_in(CHANNEL)) == 1
    assert "1 request(s) still running after 8 s: cancelled" in said
