"""Two ``serve`` replicas on one PostgreSQL: any replica takes any command or click (a plan shown by one is
approved through the other); a delivery retried, to either, starts nothing new; ``kill -9`` of one mid-restart
is told interrupted by the other within the lease, and its pending plan stays valid. Real serve subprocesses in
HTTP mode, signed requests, the fake Slack; one PostgreSQL database, one lab host (also named ct130, reached
through a slow proxy so a restart there is under way long enough to be killed) and one pair of replicas."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from bot.demo.host import DemoHost, demo_host
from commands.store.leases import LEASE_S, RENEW_EVERY_S
from tests.conftest import write_inventory
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.slack_fake.records import Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import block_actions_body, slash_command_body
from tests.test_serve_recovery import APPROVER, CHANNEL, INVITED, OTHER, REQUESTER, SECRET, Bot, buttons

pytestmark = [pytest.mark.tier2, pytest.mark.timeout(300)]


class Replica(Bot):
    """A serve process on the PostgreSQL URL; its reads go through psycopg (the URL is the database)."""

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(str(self.db)) as conn:
            return list(conn.execute(sql, params).fetchall())

    def lock_of(self, host: str) -> tuple[str, int] | None:
        rows = self._rows("SELECT operation_id, pid FROM locks WHERE host = %s", (host,))
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def events(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        return [(kind, op, json.loads(details))
                for kind, op, details in self._rows("SELECT kind, operation_id, details FROM events ORDER BY id")]


@dataclass
class Pair:
    host: DemoHost
    slack: FakeSlack
    proxy: DelayProxy
    a: Replica
    b: Replica


@pytest_asyncio.fixture(scope="module")
async def pair(pg_database: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pair]:
    tmp = tmp_path_factory.mktemp("replicas")
    async with demo_host("ct129") as host, FakeSlack(channels=INVITED, signing_secret=SECRET) as slack, \
            DelayProxy("127.0.0.1", host.ssh_port) as proxy:
        document = host.inventory()
        document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False, "expire_after_s": 600}
        slow = document["hosts"]["ct130"] = copy.deepcopy(document["hosts"]["ct129"])
        slow["port"] = proxy.port
        slow["service"] |= {"expect_flags": [], "forbid_flags": []}
        known = tmp / "known_hosts"
        line = host.known_hosts.read_text()
        known.write_text(line + f"[127.0.0.1]:{proxy.port} " + line.split(" ", 1)[1])
        document["ssh"]["known_hosts"] = str(known)
        inventory = write_inventory(tmp / "inventory.yml", document)
        a, b = Replica(slack, inventory, pg_database), Replica(slack, inventory, pg_database)  # type: ignore[arg-type]
        try:
            await a.start()  # one after the other: the first applies the migrations, the second finds them
            await b.start()
            yield Pair(host, slack, proxy, a, b)
        finally:
            await a.stop()
            await b.stop()


async def test_a_plan_shown_by_one_replica_is_approved_through_the_other(pair: Pair) -> None:
    plan, plan_id = await pair.a.plan_awaiting_approval()
    assert pair.a.lock_of("ct129") == (plan_id, pair.a.pid), "the replica that showed the plan holds the host"
    click = click_body(pair, plan.ts, "restore_approve", plan_id, APPROVER)
    assert (await pair.slack.deliver(url(pair.b), click)).status_code == 200
    assert (await pair.slack.deliver(url(pair.a), click, retry=1)).status_code == 200  # Slack's retry, to A
    await pair.slack.wait_until(lambda: "restore: PASS" in pair.slack.message(CHANNEL, plan.ts).text, timeout=60,
                                what="the restore's verdict, approved through the other replica")
    assert pair.host.live_dir.joinpath("spec_info.py").read_bytes() == pair.host.backup_dir.joinpath(
        "spec_info.py").read_bytes()
    mine = [(kind, details) for kind, op, details in pair.b.events() if op == plan_id]
    assert [kind for kind, _ in mine].count("approved") == 1
    assert "refused" not in [kind for kind, _ in mine], "the retried click is dropped, not judged a second time"
    assert [details["verdict"] for kind, details in mine if kind == "finished"] == ["pass"]
    assert pair.a.lock_of("ct129") is None, "the host is free again"
    assert not buttons(pair.slack.message(CHANNEL, plan.ts)), "the plan's buttons are gone"


def click_body(pair: Pair, message_ts: str, action_id: str, value: str, user: str) -> bytes:
    """One click as Slack sends it: its own trigger_id and action_ts (a retry repeats them)."""
    return block_actions_body({
        "type": "block_actions", "user": {"id": user}, "api_app_id": "A0", "token": "t",
        "trigger_id": pair.slack.trigger_id(user), "team": {"id": "T0TEST"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": message_ts}, "response_url": pair.slack.response_url(),
        "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value,
                     "action_ts": f"{time.time():.6f}"}]})


async def new_plan(replica: Replica, command: str, text: str) -> tuple[Message, str]:
    """Type the command; the plan it shows (a new message with buttons, not one an earlier test left) and its id."""
    seen = {m.ts for m in replica.slack.messages_in(CHANNEL)}
    await replica.command(command, text)

    def shown() -> list[Message]:
        return [m for m in replica.slack.messages_in(CHANNEL) if m.ts not in seen and buttons(m)
                and buttons(m)[0]["action_id"] == f"{command[1:]}_approve" and text in m.text]
    await replica.slack.wait_until(lambda: bool(shown()), timeout=30, what=f"the plan of {command} {text}")
    return shown()[0], str(buttons(shown()[0])[0]["value"])


def url(replica: Replica) -> str:
    return f"http://127.0.0.1:{replica.port}/slack/events"


async def test_a_slack_retry_to_either_replica_starts_nothing_new(pair: Pair) -> None:
    before = len([kind for kind, _, _ in pair.a.events() if kind == "requested"])
    body = slash_command_body("/verify", "ct129", REQUESTER, CHANNEL, pair.slack.response_url(),
                              pair.slack.trigger_id(REQUESTER))
    first = await pair.slack.deliver(url(pair.a), body)
    again = await pair.slack.deliver(url(pair.b), body, retry=1)  # the other replica gets Slack's retry
    same = await pair.slack.deliver(url(pair.a), body, retry=2)  # and the first one gets it once more
    assert first.status_code == again.status_code == same.status_code == 200

    def verdicts() -> list[str]:
        return [m.text for m in pair.slack.messages_in(CHANNEL) if "ct129 verify:" in m.text]
    await pair.slack.wait_until(lambda: bool(verdicts()), timeout=60, what="the verify's verdict")
    requested = [op for kind, op, _ in pair.a.events() if kind == "requested"][before:]
    assert len(requested) == 1, f"one delivery, retried twice, started {len(requested)} operations"
    assert len(verdicts()) == 1


async def test_kill_9_mid_restart_is_told_interrupted_by_the_other_within_the_lease(pair: Pair) -> None:
    a, b, slack = pair.a, pair.b, pair.slack
    waiting, waiting_id = await new_plan(a, "/restart", "ct129")
    pair.proxy.set_delay(0.3)  # ct130's restart: each round trip slow, so it is still under way when A dies
    plan, plan_id = await new_plan(a, "/restart", "ct130")
    assert (await slack.deliver(url(a), click_body(pair, plan.ts, "restart_approve", plan_id, APPROVER))
            ).status_code == 200
    await slack.wait_until(lambda: "verifying" in slack.message(CHANNEL, plan.ts).text, timeout=60,
                           what="the restart under way on A")
    a.kill()
    killed_at = time.monotonic()
    await a.process.wait()  # type: ignore[union-attr]
    pair.proxy.set_delay(0)
    await slack.wait_until(lambda: any("interrupted" in m.text for m in slack.thread(CHANNEL, plan.ts)),
                           timeout=LEASE_S + 3 * RENEW_EVERY_S, what="B's interrupted note in the restart's thread")
    took = time.monotonic() - killed_at
    print(f"\nkill -9 to the other replica's interrupted message: {took:.1f} s "
          f"(lease {LEASE_S:g} s, renewed every {RENEW_EVERY_S:g} s)")
    note = next(m for m in slack.thread(CHANNEL, plan.ts) if "interrupted" in m.text)
    assert "last step recorded" in json.dumps(note.blocks)
    mine = [(kind, details) for kind, op, details in b.events() if op == plan_id]
    assert [d["verdict"] for kind, d in mine if kind == "finished"] == ["interrupted"], "told once, by one replica"
    assert [kind for kind, _ in mine].count("approved") == 1, "never approved or started again"
    assert b.lock_of("ct130") is None, "the dead replica's host is free again"
    # The plan A showed and never saw decided stays valid: B holds its host now, under B's own lease.
    await until("B adopting A's pending plan", lambda: b.lock_of("ct129") == (waiting_id, b.pid),
                timeout_s=LEASE_S + 3 * RENEW_EVERY_S, interval_s=0.5)
    busy = await b.command("/restart", "ct129", user=OTHER)
    assert "ct129 is busy" in busy.text and waiting_id in busy.text, busy.text
    assert buttons(slack.message(CHANNEL, waiting.ts)), "its buttons are still there"
