"""PostgreSQL stopped and started again while proofbot works: the store says it could not record (never hangs,
never claims what it could not write), and takes writes again when the server is back, with no restart. One
module cluster of its own (it is stopped and started; the session's is shared), a real ``serve`` in HTTP mode,
the fake Slack, and a lab host reached through a proxy that can hold the SSH link still."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from bot.demo.host import DemoHost, demo_host
from commands.errors import CouldNotRecord
from commands.store.db import AuditStore
from commands.store.pg import POOL_TIMEOUT_S
from tests.conftest import REPO, write_inventory
from tests.lab import skip_or_fail
from tests.lab.postgres import BIN, START_TIMEOUT_S, Cluster, why_no_postgres
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import block_actions_body
from tests.test_replicas import Replica, new_plan, url
from tests.test_serve_recovery import APPROVER, CHANNEL, INVITED, SECRET

pytestmark = [pytest.mark.tier2, pytest.mark.timeout(300)]


class StoppableCluster(Cluster):
    """The lab cluster, stopped (``pg_ctl stop -m fast``: every connection cut) and started again on its data."""

    def pause(self) -> None:
        self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def resume(self) -> None:
        options = f"-k {self.socket_dir} -c listen_addresses='' -p 5432 -c max_connections=60 -c fsync=off"
        self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t",
                        str(START_TIMEOUT_S), "-o", options, "start"], timeout=START_TIMEOUT_S + 10)


@pytest.fixture(scope="module")
def cluster() -> Iterator[StoppableCluster]:
    reason = why_no_postgres()
    if reason:
        skip_or_fail(reason)
    own = StoppableCluster()
    try:
        own.start()
    except RuntimeError as exc:
        skip_or_fail(str(exc))
    yield own
    own.stop()


def test_a_store_waits_bounded_while_the_server_is_down_and_writes_again_when_it_is_back(
        cluster: StoppableCluster) -> None:
    store = AuditStore.open(cluster.database("pool"))
    try:
        assert asyncio.run(store.transaction(lambda conn: conn.execute("SELECT 1 AS one").fetchone())) == {"one": 1}
        cluster.pause()
        began = time.monotonic()
        with pytest.raises(CouldNotRecord) as failed:
            asyncio.run(store.write(lambda db: db.execute("SELECT 1")))
        waited = time.monotonic() - began
        assert "could not record in the audit database" in failed.value.message
        assert "nothing of it was written" in failed.value.message, failed.value.message
        print(f"\na write with the server down failed after {waited:.1f} s (pool timeout {POOL_TIMEOUT_S:g} s)")
        cluster.resume()
        # The same store, no reopening: the pool's dead connection was dropped, a new one is made.
        assert asyncio.run(until_written(store)) == {"one": 1}
    finally:
        store.close()


async def until_written(store: AuditStore) -> object:
    deadline = time.monotonic() + 30
    while True:
        try:
            return await store.transaction(lambda conn: conn.execute("SELECT 1 AS one").fetchone())
        except CouldNotRecord:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@dataclass
class Lab:
    host: DemoHost
    slack: FakeSlack
    proxy: DelayProxy
    bot: Replica
    db: str
    inventory: Path


@pytest_asyncio.fixture(scope="module")
async def lab(cluster: StoppableCluster, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Lab]:
    tmp = tmp_path_factory.mktemp("pgfault")
    db = cluster.database("serve")
    async with demo_host("ct129") as host, FakeSlack(channels=INVITED, signing_secret=SECRET) as slack, \
            DelayProxy("127.0.0.1", host.ssh_port) as proxy:
        document = host.inventory()
        document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False, "expire_after_s": 600}
        document["hosts"]["ct129"]["port"] = proxy.port  # its SSH link can be held still
        known = tmp / "known_hosts"
        known.write_text(f"[127.0.0.1]:{proxy.port} " + host.known_hosts.read_text().split(" ", 1)[1])
        document["ssh"]["known_hosts"] = str(known)
        inventory = write_inventory(tmp / "inventory.yml", document)
        bot = Replica(slack, inventory, db)  # type: ignore[arg-type]  # a URL where a path may be
        await bot.start()
        try:
            yield Lab(host, slack, proxy, bot, db, inventory)
        finally:
            await bot.stop()


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


async def test_postgresql_stopped_mid_restore_is_said_could_not_record_and_the_bot_recovers(
        lab: Lab, cluster: StoppableCluster) -> None:
    slack, bot = lab.slack, lab.bot
    before, backup = digests(lab.host.live_dir), digests(lab.host.backup_dir)
    plan, plan_id = await new_plan(bot, "/restore", "ct129")
    response_url = slack.response_url()
    lab.proxy.set_delay(0.2)
    assert (await slack.deliver(url(bot), approve(slack, plan.ts, plan_id, response_url))).status_code == 200
    # Approved: the restore is on its way to the host. Hold its SSH link, stop the database, let the link go.
    await until("the approval recorded", lambda: "approved" in kinds_of(bot, plan_id), timeout_s=60,
                interval_s=0.05)
    lab.proxy.blackhole()
    await asyncio.to_thread(cluster.pause)
    lab.proxy.restore()
    lab.proxy.set_delay(0)
    await slack.wait_until(lambda: bool(said_to(slack, response_url)), timeout=60,
                           what="the ephemeral saying the restore could not be recorded")
    said = said_to(slack, response_url)[0]
    assert "could not record" in said and "audit database" in said and "verify the host" in said, said
    assert "Traceback" not in said and "internal error" not in said
    assert not any("restore: PASS" in m.text for m in [slack.message(CHANNEL, plan.ts),
                                                       *slack.thread(CHANNEL, plan.ts)]), "no success claimed"

    # The CLI, with the database down: exit 3 (could not check/record) and one clear line, no traceback.
    code, out, err = await proofbot("verify", "ct129", "--inventory", str(lab.inventory), "--db", lab.db)
    assert code == 3, out + err
    assert "cannot open audit database" in err and "Traceback" not in err, err

    # The host: each file as it was or as the backup has it (never half-written), no temp file left.
    now = digests(lab.host.live_dir)
    assert set(now) == set(before), f"files added or left behind: {sorted(set(now) ^ set(before))}"
    for name, digest in now.items():
        assert digest in (before[name], backup.get(name)), f"{name} is neither the original nor the backup"

    await asyncio.to_thread(cluster.resume)
    back = time.monotonic()
    # The same serve (no restart): its next turn finishes the operation interrupted and tells the thread.
    await slack.wait_until(lambda: any("interrupted" in m.text for m in slack.thread(CHANNEL, plan.ts)),
                           timeout=60, what="the restore's thread told it was interrupted")
    print(f"\ndatabase back to the thread's interrupted note: {time.monotonic() - back:.1f} s")
    assert bot.process is not None and bot.process.returncode is None, "serve kept running"
    finished = [d for kind, op, d in bot.events() if op == plan_id and kind == "finished"]
    assert [d["verdict"] for d in finished] == ["interrupted"], finished
    assert "audit database" in finished[0]["summary"]
    assert bot.lock_of("ct129") is None, "the host is free again"
    code, out, err = await proofbot("audit", "verify", "--db", lab.db)
    assert code == 0, out + err

    # A following /verify through the same serve works, and shows the host as it is.
    await bot.command("/verify", "ct129")
    await slack.wait_until(lambda: any("ct129 verify:" in m.text for m in slack.messages_in(CHANNEL)), timeout=60,
                           what="the verdict of a /verify after the database came back")


def kinds_of(bot: Replica, operation_id: str) -> list[str]:
    try:
        return [kind for kind, op, _ in bot.events() if op == operation_id]
    except Exception:  # the database between two states: asked again
        return []


async def proofbot(*argv: str) -> tuple[int, str, str]:
    """The CLI in a process of its own: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "bot.cli", *argv, cwd=REPO,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def said_to(slack: FakeSlack, response_url: str) -> list[str]:
    return [json.dumps(r.body) for r in slack.responses_to(response_url)]


def approve(slack: FakeSlack, message_ts: str, plan_id: str, response_url: str) -> bytes:
    return block_actions_body({
        "type": "block_actions", "user": {"id": APPROVER}, "api_app_id": "A0", "token": "t",
        "trigger_id": slack.trigger_id(APPROVER), "team": {"id": "T0TEST"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": message_ts}, "response_url": response_url,
        "actions": [{"type": "button", "action_id": "restore_approve", "block_id": "b", "value": plan_id,
                     "action_ts": f"{time.time():.6f}"}]})
