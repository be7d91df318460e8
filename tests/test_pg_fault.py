"""PostgreSQL stopped and started again while proofbot works: the store says it could not record (never hangs,
never claims what it could not write), and takes writes again when the server is back, with no restart. One
module cluster of its own (it is stopped and started; the session's is shared), a real ``serve`` in HTTP mode,
the fake Slack, and a lab host reached through a proxy that can hold the SSH link still."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from bot.cli.main import main
from bot.demo.host import DemoHost, demo_host
from commands.errors import CouldNotRecord
from commands.findings import Evidence, Finding
from commands.operation import Origin
from commands.store import locks
from commands.store.db import WRITES, AuditStore, WriteTally
from commands.store.deliveries import claim, release_unstarted
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.store.pg import POOL_TIMEOUT_S
from commands.store.recovery import UNRECORDED, Interrupted, settle_unrecorded
from commands.vocabulary import CheckStatus, EventKind, Operation, Verdict
from tests.conftest import write_inventory
from tests.lab import skip_or_fail
from tests.lab.postgres import BIN, START_TIMEOUT_S, Cluster, private_cluster
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import block_actions_body, slash_command_body
from tests.test_replicas import Replica, main_pid, new_plan, starts, url
from tests.test_serve_recovery import APPROVER, CHANNEL, INVITED, SECRET

pytestmark = [pytest.mark.tier2, pytest.mark.timeout(300)]
FAILING_USER = "U0FAILS"
# The operation's first write, refused by the database for one user (a trigger the test adds and drops).
FAIL_FIRST_WRITE = f"""
CREATE FUNCTION pgfault_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  IF NEW.kind = 'requested' AND NEW.details::text LIKE '%slack:{FAILING_USER}%' THEN RAISE EXCEPTION 'injected';
  END IF;
  RETURN NEW; END $$;
CREATE TRIGGER pgfault_refuse BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION pgfault_refuse();
"""


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
    with private_cluster(skip_or_fail, StoppableCluster) as own:
        yield own


async def test_a_store_waits_bounded_while_the_server_is_down_and_settles_when_it_is_back(
        cluster: StoppableCluster) -> None:
    """In one process, as serve holds it: an operation (its request, its host's lock) whose step, ending and lock
    release the stopped server refuses, and a delivery claim to release; all settled once it is back."""
    store = AuditStore.open(cluster.database("pool"))
    try:
        log = audit_log(store, Operation.RESTORE, "op-cut", "ct129", "slack:U0REQ")
        await log.requested(Origin("slack:U0REQ", "slack", CHANNEL, "1.000"))
        lock = await locks.acquire(store, "ct129", "op-cut", Operation.RESTORE, "slack:U0REQ")
        await log.step(Finding("snapshot", CheckStatus.PASS, "1 file(s) copied", Evidence.of("cp", 0, "", 0.01)))
        assert await claim(store, "command:cut", "command")
        # The connection cut inside a transaction (as a server restart cuts it): rolled back whole, said so.
        with pytest.raises(CouldNotRecord, match="nothing of it was written"):
            await store.write(lambda db: (db.execute("DELETE FROM deliveries"),
                                          db.execute("SELECT pg_terminate_backend(pg_backend_pid())")))
        assert not await claim(store, "command:cut", "command"), "the claim is still there"
        # One that did finish, whose host's lock the stopped server will not free.
        done = audit_log(store, Operation.RESTART, "op-done", "ct130", "slack:U0REQ")
        await done.requested(Origin("slack:U0REQ", "slack", CHANNEL, "2.000"))
        done_lock = await locks.acquire(store, "ct130", "op-done", Operation.RESTART, "slack:U0REQ")
        await done.finished(Finished(Verdict.PASS, "restarted"))
        await asyncio.to_thread(cluster.pause)
        began = time.monotonic()
        with pytest.raises(CouldNotRecord) as failed:
            await log.step("replace")
        waited = time.monotonic() - began
        assert "could not record in the audit database" in failed.value.message
        assert "nothing of it was written" in failed.value.message, failed.value.message
        print(f"\na write with the server down failed after {waited:.1f} s (pool timeout {POOL_TIMEOUT_S:g} s)")
        assert store.unrecorded == {"op-cut": (Operation.RESTORE, "ct129")}, "its step failed: to be settled"
        store.unrecorded.clear()
        with pytest.raises(CouldNotRecord):
            await locks.release(store, lock)
        with pytest.raises(CouldNotRecord):
            await locks.release(store, done_lock)
        assert await release_unstarted(store, "command:cut", WriteTally())  # released later, not now
        assert store.unrecorded == {"op-cut": (Operation.RESTORE, "ct129"), "op-done": (Operation.RESTART, "ct130")}
        assert store.unclaimed == {"command:cut"}
        await asyncio.to_thread(cluster.resume)
        # The same store, no reopening: the pool's dead connection was dropped, a new one is made.
        settled = await until_settled(store)
        assert [(op.operation_id, op.last_step, op.reason, op.channel, op.thread_ts) for op in settled] == [
            ("op-cut", "snapshot: 1 file(s) copied", UNRECORDED, CHANNEL, "1.000")], "to be told in its thread"
        assert [e.kind for e in await store.events_of("op-cut")][-2:] == [EventKind.FINISHED,
                                                                           EventKind.LOCK_RELEASED_STALE]
        assert await locks.holder_of(store, "ct129") is None
        assert await locks.holder_of(store, "ct130") is None, "a finished operation's lock freed, nothing told"
        assert await claim(store, "command:cut", "command"), "the delivery was released: a retry runs"
        assert await settle_unrecorded(store) == [], "settled once"
    finally:
        store.close()


async def until_settled(store: AuditStore) -> list[Interrupted]:
    deadline = time.monotonic() + 30
    while True:
        try:
            return await settle_unrecorded(store)
        except CouldNotRecord:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)




async def test_a_claim_is_released_only_when_nothing_was_written_after_it(store_target: Path | str) -> None:
    """The rule the Slack error handler applies (bot/slack/once.py), on both backends."""
    store = AuditStore.open(store_target)
    try:
        assert await claim(store, "command:a", "command")
        WRITES.set(WriteTally())  # this test's own context: as a listener's, from its claim on
        assert await release_unstarted(store, "command:a", WriteTally())
        assert await claim(store, "command:a", "command"), "released: Slack's retry claims it"
        handled = WriteTally()
        WRITES.set(handled)
        await store.write(lambda db: db.execute("SELECT 1"))  # something of the operation recorded
        assert handled.writes == 1
        assert not await release_unstarted(store, "command:a", handled)
        assert not await claim(store, "command:a", "command"), "kept: a retry starts nothing"
    finally:
        store.close()


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
        document["hosts"]["ct130"] = copy.deepcopy(document["hosts"]["ct129"])  # the same, for a test of its own
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
        lab: Lab, cluster: StoppableCluster, capsys: pytest.CaptureFixture[str]) -> None:
    slack, bot = lab.slack, lab.bot
    before, backup = digests(lab.host.live_dir), digests(lab.host.backup_dir)
    entries = set(os.listdir(lab.host.live_dir))  # files and folders: a restore's temp dir would show
    plan, plan_id = await new_plan(bot, "/restore", "ct129")
    response_url = slack.response_url()
    lab.proxy.set_delay(0.2)
    assert (await slack.deliver(url(bot), approve(slack, plan.ts, plan_id, response_url))).status_code == 200
    # Mid-apply (its copy of the live files kept, their replacement next): hold its SSH link, stop the
    # database, let the link go. The replacement runs; recording it fails.
    await until("the snapshot step recorded", lambda: "snapshot" in steps_of(bot, plan_id), timeout_s=60,
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
    code, out, err = await proofbot(capsys, "verify", "ct129", "--inventory", str(lab.inventory), "--db", lab.db)
    assert code == 3, out + err
    assert "cannot open audit database" in err and "Traceback" not in err, err

    # The host: each file as it was or as the backup has it (never half-written), no temp file left.
    now = digests(lab.host.live_dir)
    left = set(os.listdir(lab.host.live_dir)) ^ entries
    assert not left, f"added or left behind beside the live files: {sorted(left)}"
    for name, digest in now.items():
        assert digest in (before[name], backup.get(name)), f"{name} is neither the original nor the backup"
    print(f"\nthe restore's cut: {[n for n in now if now[n] != before[n]] or 'no'} file replaced before it")

    await asyncio.to_thread(cluster.resume)
    back = time.monotonic()
    # The same serve (no restart): its next turn finishes the operation interrupted and tells the thread.
    await slack.wait_until(lambda: any("interrupted" in m.text for m in slack.thread(CHANNEL, plan.ts)),
                           timeout=60, what="the restore's thread told it was interrupted")
    print(f"\ndatabase back to the thread's interrupted note: {time.monotonic() - back:.1f} s")
    note = next(m for m in slack.thread(CHANNEL, plan.ts) if "interrupted" in m.text)
    assert "the audit database did not take a write" in json.dumps(note.blocks), "why, not 'proofbot stopped'"
    assert "last step recorded" in json.dumps(note.blocks) and "Verify now" in json.dumps(note.blocks)
    assert bot.process is not None and bot.process.returncode is None, "serve kept running"
    finished = [d for kind, op, d in bot.events() if op == plan_id and kind == "finished"]
    assert [d["verdict"] for d in finished] == ["interrupted"], finished
    assert "audit database" in finished[0]["summary"]
    assert bot.lock_of("ct129") is None, "the host is free again"
    code, out, err = await proofbot(capsys, "audit", "verify", "--db", lab.db)
    assert code == 0, out + err

    # A following /verify through the same serve works, and shows the host as it is.
    await bot.command("/verify", "ct129")
    await slack.wait_until(lambda: verdicts(slack) == 1, timeout=60,
                           what="the verdict of a /verify after the database came back")


def steps_of(bot: Replica, operation_id: str) -> list[str]:
    try:
        return [str(d.get("name")) for kind, op, d in bot.events() if op == operation_id and kind == "step"]
    except Exception:  # the database between two states: asked again
        return []


async def proofbot(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI's own entry point (in a thread: it runs its own event loop): exit code, stdout, stderr. Anything
    it raised instead of printing (a traceback) fails the test here."""
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def said_to(slack: FakeSlack, response_url: str) -> list[str]:
    return [json.dumps(r.body) for r in slack.responses_to(response_url)]


def approve(slack: FakeSlack, message_ts: str, plan_id: str, response_url: str,
            action: str = "restore_approve") -> bytes:
    return block_actions_body({
        "type": "block_actions", "user": {"id": APPROVER}, "api_app_id": "A0", "token": "t",
        "trigger_id": slack.trigger_id(APPROVER), "team": {"id": "T0TEST"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": message_ts}, "response_url": response_url,
        "actions": [{"type": "button", "action_id": action, "block_id": "b", "value": plan_id,
                     "action_ts": f"{time.time():.6f}"}]})


async def test_a_delivery_whose_first_write_failed_is_released_so_the_retry_runs(lab: Lab) -> None:
    import psycopg

    slack, bot = lab.slack, lab.bot
    with psycopg.connect(lab.db, autocommit=True) as conn:
        conn.execute(FAIL_FIRST_WRITE.encode())
    response_url = slack.response_url()
    body = slash_command_body("/verify", "ct130", FAILING_USER, CHANNEL, response_url, slack.trigger_id(FAILING_USER))
    try:
        assert (await slack.deliver(url(bot), body)).status_code == 200
        await slack.wait_until(lambda: "internal error" in " ".join(said_to(slack, response_url)), timeout=60,
                               what="the failed first write said to the user")
    finally:
        with psycopg.connect(lab.db, autocommit=True) as conn:
            conn.execute(b"DROP TRIGGER pgfault_refuse ON events; DROP FUNCTION pgfault_refuse()")
    assert not requested_by(bot, FAILING_USER), "the failed request was rolled back"
    before = verdicts(slack, "ct130")
    # Slack's retry of the same delivery runs it now; a second retry, once it has started, does not.
    assert (await slack.deliver(url(bot), body, retry=1)).status_code == 200
    await until("the retry's operation requested", lambda: requested_by(bot, FAILING_USER), timeout_s=60,
                interval_s=0.2)
    assert (await slack.deliver(url(bot), body, retry=2)).status_code == 200
    await slack.wait_until(lambda: verdicts(slack, "ct130") > before, timeout=60, what="the retried verify's verdict")
    assert len(requested_by(bot, FAILING_USER)) == 1, "one operation for one delivery retried twice"


def verdicts(slack: FakeSlack, host: str = "ct129") -> int:
    """Verifies of the host done (a verdict on their parent; one under way says "verifying")."""
    return len([m for m in slack.messages_in(CHANNEL) if re.match(rf"{host} verify: (PASS|FAIL|ERROR)", m.text)])


def requested_by(bot: Replica, user: str) -> list[str | None]:
    return [op for kind, op, d in bot.events() if kind == "requested" and d.get("origin", {}).get("actor")
            == f"slack:{user}"]


# The restart's ``restart-sent`` write held in the database (a trigger that sleeps), so the stop lands exactly while
# it is being written: the moment before the command would be sent.
HOLD_RESTART_SENT = """
CREATE FUNCTION pgfault_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  IF NEW.kind = 'step' AND NEW.details::text LIKE '%restart-sent%' THEN PERFORM pg_sleep(120); END IF;
  RETURN NEW; END $$;
CREATE TRIGGER pgfault_hold BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION pgfault_hold();
"""


def sql(db: str, statement: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        cursor = conn.execute(statement.encode())
        return list(cursor.fetchall()) if cursor.description else []


async def test_postgresql_stopped_at_restart_sent_means_not_restarted_and_nothing_sent(
        lab: Lab, cluster: StoppableCluster, capsys: pytest.CaptureFixture[str]) -> None:
    slack, bot = lab.slack, lab.bot
    plan, plan_id = await new_plan(bot, "/restart", "ct129")
    pid, started = await main_pid(lab.host), starts(lab.host)
    response_url = slack.response_url()
    sql(lab.db, HOLD_RESTART_SENT)
    paused = False
    try:
        assert (await slack.deliver(url(bot), approve(slack, plan.ts, plan_id, response_url,
                                                      "restart_approve"))).status_code == 200
        await until("restart-sent being written", lambda: sql(
            lab.db, "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'"), timeout_s=60, interval_s=0.1)
        await asyncio.to_thread(cluster.pause)
        paused = True
        await slack.wait_until(lambda: bool(said_to(slack, response_url)), timeout=60,
                               what="the ephemeral saying the restart could not be recorded")
    finally:
        if paused:
            await asyncio.to_thread(cluster.resume)
        sql(lab.db, "DROP TRIGGER pgfault_hold ON events; DROP FUNCTION pgfault_hold()")
    back = time.monotonic()
    said = said_to(slack, response_url)[0]
    assert "not restarted: proofbot could not record it" in said and "same PID" in said, said
    assert "Traceback" not in said and "internal error" not in said
    assert await main_pid(lab.host) == pid and starts(lab.host) == started, "nothing was sent: same PID, no start"
    # Once the database is back, the same serve settles it: interrupted, the lock freed, the thread told.
    await slack.wait_until(lambda: any("interrupted" in m.text for m in slack.thread(CHANNEL, plan.ts)),
                           timeout=60, what="the restart's thread told it was interrupted")
    print(f"\ndatabase back to the restart's interrupted note: {time.monotonic() - back:.1f} s")
    note = json.dumps(next(m for m in slack.thread(CHANNEL, plan.ts) if "interrupted" in m.text).blocks)
    assert any("not restarted: proofbot could not record it" in m.text for m in slack.thread(CHANNEL, plan.ts)), \
        "the channel reads it too, not only the approver"
    assert "the audit database did not take a write" in note and "`before`" in note, note
    await slack.wait_until(lambda: "interrupted" in slack.message(CHANNEL, plan.ts).text, timeout=30,
                           what="the restart's plan message saying interrupted")
    parent = json.dumps(slack.message(CHANNEL, plan.ts).blocks)  # the plan kept, with who approved it
    assert "Restart plan for ct129" in parent and f"approved by <@{APPROVER}>" in parent and "*interrupted*" in parent
    finished = [d for kind, op, d in bot.events() if op == plan_id and kind == "finished"]
    assert [d["verdict"] for d in finished] == ["interrupted"], finished
    assert not [d for kind, op, d in bot.events() if op == plan_id and d.get("step") == "restart-sent"]
    assert bot.lock_of("ct129") is None, "the host is free again"
    assert await main_pid(lab.host) == pid and starts(lab.host) == started, "and nothing was sent later"
    code, out, err = await proofbot(capsys, "audit", "verify", "--db", lab.db)
    assert code == 0, out + err
