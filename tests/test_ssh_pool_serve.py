"""Tier 1, end to end: ``proofbot serve`` (a real process, the real bolt app over Socket Mode) keeps a host's SSH
connection warm between two ``/verify``s, one login for both, and closes it when it stops."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.demo.host import DemoHost
from tests.conftest import write_inventory
from tests.lab.waits import until
from tests.serve_rig import kinds, start_serve, stop_serve
from tests.slack_fake.server import FakeSlack

CHANNEL = "C0OPS"


async def asked_until_started(slack: FakeSlack, host: str, db: Path, count: int) -> None:
    """/verify host until the count-th verify starts: while the one before still posts its thread, the same
    verify is refused ("already running"), as a user would see it."""
    for _ in range(60):
        await (await slack.socket_send_slash_command("/verify", host, channel_id=CHANNEL)).wait()
        try:
            await until(f"verify {count} requested", lambda: kinds(db).count("requested") == count, 1)
            return
        except AssertionError:
            continue
    raise AssertionError(f"verify {count} never started")


def summaries(slack: FakeSlack) -> list[str]:
    return [m.text for m in slack.messages_in(CHANNEL) if m.text.startswith("Summary of operation")]


async def test_serve_verifies_a_host_twice_over_one_login_and_closes_it_at_exit(clean_host: DemoHost,
                                                                              tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", clean_host.inventory())
    db = tmp_path / "a.db"
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        slack.set_rate_limit("chat.postMessage", max_calls=1000, per_seconds=1.0)  # pacing is not what is tested
        before = clean_host.logins.total
        bot = await start_serve(slack, inventory, db, stdout=asyncio.subprocess.DEVNULL)  # Socket Mode
        try:
            await slack.wait_for_socket(timeout=30)
            for count in (1, 2):
                await asked_until_started(slack, clean_host.name, db, count)
                await slack.wait_until(lambda n=count: len(summaries(slack)) == n, timeout=60,
                                       what=f"verify {count}'s thread")
                await until(f"verify {count} finished", lambda n=count: kinds(db).count("finished") == n)
            assert clean_host.logins.total - before == 1, "the second /verify logged in again"
            assert clean_host.logins.open == 1  # kept, idle, for the next one
            assert [m.edits[-1].text for m in slack.messages_in(CHANNEL) if m.edits] == [
                f"{clean_host.name} verify: PASS (8 pass)"] * 2
        finally:
            said = await stop_serve(bot)
    assert bot.returncode == 0, said
    await until("the host saw the warm connection close at exit", lambda: clean_host.logins.open == 0)
