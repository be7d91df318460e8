"""Two ``serve`` replicas on one PostgreSQL: any replica takes any command or click (a plan shown by one is
approved through the other); a delivery retried, to either, starts nothing new; ``kill -9`` of one mid-restart
is told interrupted by the other within the lease, and its pending plan stays valid. Real serve subprocesses in
HTTP mode, signed requests, the fake Slack; one PostgreSQL database, one lab host (also named ct130, reached
through a slow proxy so a restart there is under way long enough to be killed) and one pair of replicas."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from bot.demo.host import DemoHost, demo_host
from commands.store.leases import LEASE_S, RENEW_EVERY_S
from tests.conftest import write_inventory
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.slack_fake.records import Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import block_actions_body, slash_command_body
from tests.test_serve_recovery import APPROVER, CHANNEL, INVITED, OTHER, REQUESTER, SECRET, Bot, buttons, free_port

pytestmark = [pytest.mark.tier2, pytest.mark.timeout(300)]
GROUP = ["gpu1", "gpu2", "gpu3"]  # each its own loopback host and supervisord


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
    group: list[DemoHost]  # gpu-west, restarted one at a time; its second host is reached through group_proxy
    group_proxy: DelayProxy
    metrics_url: str  # B's /metrics


def group_entry(host: DemoHost, port: int, known_hosts: Path) -> dict[str, Any]:
    entry: dict[str, Any] = host.inventory()["hosts"][host.name]
    entry["port"] = port
    entry["ssh"] = {"known_hosts": str(known_hosts), "client_keys": [str(host.client_key)]}
    return entry


def reached_through(host: DemoHost, port: int, known: Path) -> Path:
    """A known_hosts naming the host's key at the proxy's port (what ssh checks: the address it dials)."""
    line = host.known_hosts.read_text()
    known.write_text(f"[127.0.0.1]:{port} " + line.split(" ", 1)[1])
    return known


@pytest_asyncio.fixture(scope="module")
async def pair(pg_database: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pair]:
    tmp = tmp_path_factory.mktemp("replicas")
    async with AsyncExitStack() as stack:
        host, *group = await asyncio.gather(  # side by side: each waits for its own service to come up
            stack.enter_async_context(demo_host("ct129")),
            *(stack.enter_async_context(demo_host(name, flags=["--speculative-algorithm", "NEXTN"]))
              for name in GROUP))
        slack = await stack.enter_async_context(FakeSlack(channels=INVITED, signing_secret=SECRET))
        proxy = await stack.enter_async_context(DelayProxy("127.0.0.1", host.ssh_port))
        group_proxy = await stack.enter_async_context(DelayProxy("127.0.0.1", group[1].ssh_port))
        document = host.inventory()
        document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False, "expire_after_s": 600}
        document["hosts"]["ct129"]["service"] |= {"expect_flags": [], "forbid_flags": []}
        slow = document["hosts"]["ct130"] = copy.deepcopy(document["hosts"]["ct129"])
        slow["port"] = proxy.port
        known = tmp / "known_hosts"
        known.write_text(host.known_hosts.read_text() + reached_through(host, proxy.port, tmp / "kh130").read_text())
        document["ssh"]["known_hosts"] = str(known)
        for member in group:
            document["hosts"][member.name] = group_entry(member, member.ssh_port, member.known_hosts)
        document["hosts"][GROUP[1]] = group_entry(group[1], group_proxy.port,
                                                  reached_through(group[1], group_proxy.port, tmp / "kh-slow"))
        document["groups"] = {"gpu-west": GROUP}
        document["fleet"] = {"restart_batch": 1}
        inventory = write_inventory(tmp / "inventory.yml", document)
        a, b = Replica(slack, inventory, pg_database), Replica(slack, inventory, pg_database)  # type: ignore[arg-type]
        metrics_port = free_port()
        b.args = ["--metrics-port", str(metrics_port)]
        try:
            await a.start()  # one after the other: the first applies the migrations, the second finds them
            await b.start()
            yield Pair(host, slack, proxy, a, b, group, group_proxy, f"http://127.0.0.1:{metrics_port}/metrics")
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


async def new_plan(replica: Replica, command: str, text: str, action: str = "") -> tuple[Message, str]:
    """Type the command; the plan it shows (a new message with buttons, not one an earlier test left) and its id."""
    action = action or f"{command[1:]}_approve"
    seen = {m.ts for m in replica.slack.messages_in(CHANNEL)}
    await replica.command(command, text)

    def shown() -> list[Message]:
        return [m for m in replica.slack.messages_in(CHANNEL) if m.ts not in seen and buttons(m)
                and buttons(m)[0]["action_id"] == action and text in m.text]
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


def starts(host: DemoHost) -> int:
    """How many times supervisord started the host's service (its own log: one line per spawn)."""
    return (host.supervisor_config.parent / "supervisord.log").read_text().count("spawned: 'sglang'")


async def main_pid(host: DemoHost) -> int:
    return int((await host.supervisorctl("pid", "sglang")).strip())


async def scrape(url: str) -> dict[str, float]:
    """One /metrics scrape, read with prometheus-client's own parser (unlabelled samples by name)."""
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.get(url, timeout=10)
    assert response.status_code == 200
    return {sample.name: sample.value for family in text_string_to_metric_families(response.text)
            for sample in family.samples if not sample.labels}


@dataclass
class Killed:
    """What A was doing when it was killed, and what was true just before."""

    waiting: Message  # a restart plan of ct129 awaiting approval, shown by A
    waiting_id: str
    restart: Message  # ct130's restart, approved through A, under way
    restart_id: str
    rollout: Message  # gpu-west's rolling restart, approved through A: gpu1 done, gpu2 under way, gpu3 not reached
    rollout_id: str
    gpu2_part: str
    pids: dict[str, int]  # each group host's main PID before the rollout
    starts: dict[str, int]  # and its service's start count
    takeovers_before: float
    took_s: float  # kill -9 to B's interrupted note in the restart's thread


@pytest_asyncio.fixture(scope="module")
async def killed(pair: Pair) -> Killed:
    """One kill -9 of A (one lease to wait for) with a restart, a rollout and a pending plan of its own."""
    a, slack = pair.a, pair.slack
    waiting, waiting_id = await new_plan(a, "/restart", "ct129")
    rollout, rollout_id = await new_plan(a, "/restart", "gpu-west", action="rollout_approve")
    plan, plan_id = await new_plan(a, "/restart", "ct130")
    pids = {host.name: await main_pid(host) for host in pair.group}
    spawned = {host.name: starts(host) for host in pair.group}
    takeovers_before = (await scrape(pair.metrics_url))["proofbot_lease_takeovers_total"]
    pair.proxy.set_delay(1.0)  # ct130's restart: each round trip slow, so it is still under way when A dies
    pair.group_proxy.set_delay(0.3)  # and gpu2's
    for message, action, value in ((plan, "restart_approve", plan_id), (rollout, "rollout_approve", rollout_id)):
        assert (await slack.deliver(url(a), click_body(pair, message.ts, action, value, APPROVER))).status_code == 200
    await slack.wait_until(lambda: "verifying" in slack.message(CHANNEL, plan.ts).text, timeout=60,
                           what="the restart under way on A")
    pair.proxy.set_delay(5.0)  # and it stays there (proving, each poll slow) while the rollout reaches gpu2

    def gpu2_part() -> str | None:
        lock = a.lock_of(GROUP[1])
        return lock[0] if lock is not None and lock[0] != rollout_id else None
    await until("the rollout at gpu2 (gpu1 done)", gpu2_part, timeout_s=60, interval_s=0.1)
    part = gpu2_part()
    assert part is not None and "verifying" in slack.message(CHANNEL, plan.ts).text, "both still under way"
    a.kill()
    killed_at = time.monotonic()
    await a.process.wait()  # type: ignore[union-attr]
    pair.proxy.set_delay(0)
    pair.group_proxy.set_delay(0)
    await slack.wait_until(lambda: any("interrupted" in m.text for m in slack.thread(CHANNEL, plan.ts)),
                           timeout=LEASE_S + 3 * RENEW_EVERY_S, what="B's interrupted note in the restart's thread")
    took = time.monotonic() - killed_at
    print(f"\nkill -9 to the other replica's interrupted message: {took:.1f} s "
          f"(lease {LEASE_S:g} s, renewed every {RENEW_EVERY_S:g} s)")
    return Killed(waiting, waiting_id, plan, plan_id, rollout, rollout_id, part, pids, spawned, takeovers_before,
                  took)


async def test_kill_9_mid_restart_is_told_interrupted_by_the_other_within_the_lease(pair: Pair,
                                                                                    killed: Killed) -> None:
    b, slack = pair.b, pair.slack
    note = next(m for m in slack.thread(CHANNEL, killed.restart.ts) if "interrupted" in m.text)
    assert "last step recorded" in json.dumps(note.blocks)
    mine = [(kind, details) for kind, op, details in b.events() if op == killed.restart_id]
    assert [d["verdict"] for kind, d in mine if kind == "finished"] == ["interrupted"], "told once, by one replica"
    assert [kind for kind, _ in mine].count("approved") == 1, "never approved or started again"
    assert b.lock_of("ct130") is None, "the dead replica's host is free again"


async def test_kill_9_mid_rollout_restarts_no_host_twice_and_frees_the_group(pair: Pair, killed: Killed) -> None:
    b, slack = pair.b, pair.slack
    await slack.wait_until(lambda: any("interrupted" in m.text for m in slack.thread(CHANNEL, killed.rollout.ts)),
                           timeout=LEASE_S, what="B's interrupted note in the rollout's thread")
    notes = [m for m in slack.thread(CHANNEL, killed.rollout.ts) if "interrupted" in m.text]
    assert len(notes) == 1, [m.text for m in notes]
    said = json.dumps(notes[0].blocks)
    for words in ("gpu1: restarted and proven", "gpu2: under way when it stopped, its state is unknown",
                  "gpu3: not reached, never restarted"):
        assert words in said, said
    gpu1, gpu2, gpu3 = pair.group
    assert starts(gpu1) == killed.starts["gpu1"] + 1 and await main_pid(gpu1) != killed.pids["gpu1"], \
        "gpu1, restarted before the kill, keeps its new process"
    assert starts(gpu2) - killed.starts["gpu2"] in (0, 1), "gpu2, under way at the kill, is never restarted again"
    assert starts(gpu3) == killed.starts["gpu3"] and await main_pid(gpu3) == killed.pids["gpu3"], \
        "gpu3, not reached, is never restarted"
    assert [b.lock_of(name) for name in GROUP] == [None, None, None], "the group's locks are released"
    events = b.events()
    finished = {op: d["verdict"] for kind, op, d in events if kind == "finished"}
    assert finished[killed.rollout_id] == finished[killed.gpu2_part] == "interrupted"
    [ended] = [d for kind, op, d in events if kind == "finished" and op == killed.rollout_id]
    assert ended["counts"] == {"done": 1, "unknown": 1, "untouched": 1}, "the log says where each host stood"
    parts = [(details.get("fleet_operation_id"), op) for kind, op, details in events if kind == "requested"]
    mine = [op for fleet, op in parts if fleet == killed.rollout_id]
    assert len(mine) == 2 and mine[1] == killed.gpu2_part, "gpu1's and gpu2's parts; none for gpu3, none again"
    assert finished[mine[0]] == "pass"
    assert [kind for kind, op, _ in events if op == killed.rollout_id].count("approved") == 1


async def test_a_plan_pending_at_the_kill_is_adopted_and_approved_through_the_survivor(
        pair: Pair, killed: Killed) -> None:
    b, slack = pair.b, pair.slack
    await until("B adopting A's pending plan", lambda: b.lock_of("ct129") == (killed.waiting_id, b.pid),
                timeout_s=LEASE_S, interval_s=0.5)
    busy = await b.command("/restart", "ct129", user=OTHER)
    assert "ct129 is busy" in busy.text and killed.waiting_id in busy.text, busy.text
    assert buttons(slack.message(CHANNEL, killed.waiting.ts)), "its buttons are still there"
    before = await main_pid(pair.host)
    click = click_body(pair, killed.waiting.ts, "restart_approve", killed.waiting_id, APPROVER)
    assert (await slack.deliver(url(b), click)).status_code == 200
    await slack.wait_until(lambda: "restart: PASS" in slack.message(CHANNEL, killed.waiting.ts).text, timeout=60,
                           what="the adopted plan's restart, approved through B")
    assert await main_pid(pair.host) != before
    assert b.lock_of("ct129") is None


async def test_the_survivor_counts_each_operation_it_took_over(pair: Pair, killed: Killed) -> None:
    assert killed.takeovers_before == 0
    taken = {killed.restart_id, killed.rollout_id, killed.gpu2_part, killed.waiting_id}  # 3 interrupted, 1 adopted
    await until("B done taking over", lambda: pair.b.lock_of("ct129") in (None, (killed.waiting_id, pair.b.pid)),
                timeout_s=LEASE_S, interval_s=0.5)
    assert (await scrape(pair.metrics_url))["proofbot_lease_takeovers_total"] == len(taken)
