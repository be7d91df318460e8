"""Tier 1: a real ``proofbot serve`` stopped by SIGTERM mid-request stops cleanly: a request in flight is drained (its
verdict posted, its operation finished in the log) before the store closes, one still running at the drain deadline
(``PROOFBOT_DRAIN_S``) is cancelled (said in the log; the next serve tells its thread it was interrupted), and the
bot records ``bot-stopped`` last and exits 0 with no traceback. A bad ``PROOFBOT_DRAIN_S`` is refused at start."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from bot.demo.host import DemoHost
from bot.slack.serve import DRAIN_ENV, drain_s
from commands.errors import UsageError
from tests.conftest import write_inventory
from tests.fleet_rig import fleet_entry, proxied_known_hosts
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.serve_rig import free_port, gone, kinds, start_serve, stop_serve
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import slash_command_body

CHANNEL, ALICE = "C0OPS", "U0ALICE"
SECRET = "shutdown-secret"


async def _sigterm_mid_verify(clean_host: DemoHost, tmp_path: Path, *, answer_after_sigterm: bool,
                              ) -> tuple[FakeSlack, list[str], str]:
    """serve; a /verify of a host that answers nothing until serve has its SIGTERM (then all, or still nothing);
    serve's events and stderr once it exited 0 without a traceback."""
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy, \
            FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        document = clean_host.inventory()
        document["ssh"]["connect_timeout_s"] = 120
        document["hosts"] = {"h1": fleet_entry(clean_host, proxy.port, proxied_known_hosts(
            clean_host, proxy.port, tmp_path / "known_hosts"))}
        inventory = write_inventory(tmp_path / "inventory.yml", document)
        db = tmp_path / "audit.db"
        bot = await start_serve(slack, inventory, db, port := await free_port())
        try:
            await until("the bot to start", lambda: db.exists() and "bot-started" in kinds(db), 30)
            proxy.blackhole()
            ack = await slack.deliver(f"http://127.0.0.1:{port}/slack/events", slash_command_body(
                "/verify", "h1", ALICE, CHANNEL, slack.response_url(), "t1"))
            assert ack.text == ""
            await slack.wait_until(lambda: len(slack.messages_in(CHANNEL)) == 1, what="the verify's parent")
            bot.send_signal(signal.SIGTERM)
            if answer_after_sigterm:  # serve has its SIGTERM: the host now answers, the verify may end
                proxy.restore()
            said = await stop_serve(bot, signal_number=None, timeout_s=120)
        finally:
            await gone(bot)
    assert bot.returncode == 0, said
    assert "Traceback" not in said and "never retrieved" not in said and "Error" not in said, said
    events = kinds(db)
    assert events[-1] == "bot-stopped", said  # after whatever the request wrote: the store closed last
    return slack, events, said


async def test_sigterm_mid_verify_drains_it_then_exits_0(clean_host: DemoHost, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRAIN_ENV, "120")  # the drain's bound, not the test's: a loaded machine still drains it
    slack, events, said = await _sigterm_mid_verify(clean_host, tmp_path, answer_after_sigterm=True)
    assert events.count("finished") == 1, said  # the verify ended before the bot did
    assert any(message.text.startswith("Summary of operation") for message in slack.messages_in(CHANNEL))
    # serve's Web API calls (its start, the thread, the details upload) reused its session's kept-alive connections
    assert slack.connections <= len(slack.calls) // 2, (slack.connections, [c.method for c in slack.calls])


async def test_sigterm_mid_verify_past_the_drain_deadline_cancels_it_and_exits_0(
        clean_host: DemoHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRAIN_ENV, "1")
    _, events, said = await _sigterm_mid_verify(clean_host, tmp_path, answer_after_sigterm=False)
    assert "finished" not in events and "1 request(s) still running after 1 s: cancelled" in said


@pytest.mark.parametrize("written", ["soon", "-1", "3601", "nan"])
def test_a_bad_drain_time_is_refused(written: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRAIN_ENV, written)
    with pytest.raises(UsageError, match="PROOFBOT_DRAIN_S"):
        drain_s()
