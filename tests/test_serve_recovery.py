"""A bot killed with SIGKILL and started again: interrupted operations are said so in their
threads, dead locks are released, and a pending approval can still be approved."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from bot.demo.host import DemoHost, demo_host
from tests.conftest import fresh, via_port, write_inventory
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.serve_rig import start_serve, stop_serve
from tests.slack_fake.records import HttpAck, Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import block_actions_body, slash_command_body

SECRET = "restart-secret"
CHANNEL = "C0OPS"
INVITED = {CHANNEL: "ops"}
REQUESTER, APPROVER, OTHER = "U0REQ", "U0APPROVER", "U0OTHER"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Bot:
    def __init__(self, slack: FakeSlack, inventory: Path, db: Path) -> None:
        self.slack, self.inventory, self.db = slack, inventory, db
        self.port = free_port()
        self.args: list[str] = []  # more serve options (e.g. --metrics-port)
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await start_serve(self.slack, self.inventory, self.db, self.port, secret=SECRET,
                                         args=self.args, stdout=asyncio.subprocess.DEVNULL,
                                         stderr=asyncio.subprocess.DEVNULL)
        # A generous bound: under a loaded CI machine the interpreter's start alone has taken over 20 s.
        # A bot that exits fails at once, not at the deadline.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise RuntimeError(f"the bot exited with {self.process.returncode} before listening")
            try:
                async with httpx.AsyncClient(trust_env=False) as client:
                    await client.get(f"http://127.0.0.1:{self.port}/")
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
        raise RuntimeError("the bot did not start listening")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            await stop_serve(self.process)

    async def post(self, body: bytes) -> HttpAck:
        """Slack delivers the command or click (signed) and judges the ack."""
        return await self.slack.deliver(f"http://127.0.0.1:{self.port}/slack/events", body)

    async def command(self, command: str, text: str, user: str = REQUESTER) -> HttpAck:
        return await self.post(slash_command_body(command, text, user, CHANNEL, self.slack.response_url(), "t"))

    async def click(self, message_ts: str, action_id: str, value: str, user: str) -> HttpAck:
        payload: dict[str, Any] = {
            "type": "block_actions", "user": {"id": user}, "api_app_id": "A0", "token": "t", "trigger_id": "t",
            "team": {"id": "T0TEST"}, "container": {"type": "message", "message_ts": message_ts,
                                                     "channel_id": CHANNEL},
            "channel": {"id": CHANNEL}, "message": {"ts": message_ts}, "response_url": self.slack.response_url(),
            "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value,
                         "action_ts": "1"}]}
        return await self.post(block_actions_body(payload))

    def lock_of(self, host: str) -> tuple[str, int] | None:
        """The host's lock as the database holds it: (operation id, holder PID)."""
        row = sqlite3.connect(self.db).execute("SELECT operation_id, pid FROM locks WHERE host = ?", (host,)).fetchone()
        return (str(row[0]), int(row[1])) if row else None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def restart_after_sigkill(self) -> None:
        self.kill()
        assert self.process is not None
        await self.process.wait()
        await self.start()

    async def plan_awaiting_approval(self, command: str = "/restore", text: str = "ct129",
                                     but_not: str = "") -> tuple[Message, str]:
        """Type the command; wait for its plan (a message with buttons); return it and the plan id."""
        await self.command(command, text)

        def new_plans() -> list[Message]:
            return [m for m in self.slack.messages_in(CHANNEL) if buttons(m) and buttons(m)[0]["value"] != but_not]

        await self.slack.wait_until(lambda: bool(new_plans()), timeout=20, what=f"the plan of {command} {text}")
        plan = new_plans()[0]
        return plan, str(buttons(plan)[0]["value"])

    def events(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        rows = sqlite3.connect(self.db).execute("SELECT kind, operation_id, details FROM events ORDER BY id")
        return [(kind, op, json.loads(details)) for kind, op, details in rows]


@asynccontextmanager
async def running_bot(host: DemoHost, tmp_path: Path, document: dict[str, Any], *,
                      expire_after_s: float = 600) -> AsyncIterator[Bot]:
    document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False,
                             "expire_after_s": expire_after_s}
    inventory = write_inventory(tmp_path / "inventory.yml", document)
    async with FakeSlack(channels=INVITED, signing_secret=SECRET) as slack:
        bot = Bot(slack, inventory, tmp_path / "audit.db")
        await bot.start()
        try:
            yield bot
        finally:
            await bot.stop()


def buttons(message: Message) -> list[dict[str, Any]]:
    return [e for b in message.blocks or [] if b["type"] == "actions" for e in b["elements"]]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def lab() -> AsyncIterator[DemoHost]:
    """The module's loopback host in the seed's broken state; a test that restores it gets its files afresh."""
    async with demo_host("ct129") as host:
        yield host


async def test_pending_approval_survives_a_sigkill(lab: DemoHost, tmp_path: Path) -> None:
    host = fresh(lab)
    async with running_bot(host, tmp_path, host.inventory()) as bot:
        plan, plan_id = await bot.plan_awaiting_approval()
        killed = bot.pid
        await bot.restart_after_sigkill()
        # Taken over: the lock names the new bot. A lock left naming the dead one would be stale, and the
        # next request would take the host from under the plan.
        assert bot.lock_of("ct129") == (plan_id, bot.pid) and bot.pid != killed
        busy = await bot.command("/restore", "ct129", user=OTHER)
        assert "ct129 is busy" in busy.text and plan_id in busy.text, busy.text
        assert (await bot.click(plan.ts, "restore_approve", plan_id, APPROVER)).status_code == 200
        await bot.slack.wait_until(lambda: "restore: PASS" in bot.slack.message(CHANNEL, plan.ts).text, timeout=30,
                                   what="the restore verdict after the restart")
        assert host.live_dir.joinpath("spec_info.py").read_bytes() == host.backup_dir.joinpath(
            "spec_info.py").read_bytes()
        kinds = [kind for kind, op, _ in bot.events() if op == plan_id]
        assert "interrupted" not in json.dumps([d for _, op, d in bot.events() if op == plan_id])
        assert kinds.count("approved") == 1 and kinds[-1] == "finished"


def expires_at(bot: Bot, plan_id: str) -> float:
    return float(sqlite3.connect(bot.db).execute("SELECT expires_at FROM plans WHERE id = ?", (plan_id,)).fetchone()[0])


async def assert_shown_expired_and_host_freed(bot: Bot, plan: Message, plan_id: str) -> None:
    await bot.slack.wait_until(lambda: "expired at" in bot.slack.message(CHANNEL, plan.ts).text, timeout=30,
                               what="the plan shown expired")
    assert not buttons(bot.slack.message(CHANNEL, plan.ts)), "the buttons go away"
    assert [op for kind, op, _ in bot.events() if kind == "expired"] == [plan_id]
    assert bot.lock_of("ct129") is None, "the expired plan's lock is freed"
    _, new_plan_id = await bot.plan_awaiting_approval(but_not=plan_id)
    assert bot.lock_of("ct129") == (new_plan_id, bot.pid)


async def test_plan_that_expired_while_the_bot_was_down_is_shown_expired_at_start(lab: DemoHost,
                                                                                  tmp_path: Path) -> None:
    host = fresh(lab)
    async with running_bot(host, tmp_path, host.inventory(), expire_after_s=2) as bot:
        plan, plan_id = await bot.plan_awaiting_approval()
        bot.kill()
        await bot.process.wait()  # type: ignore[union-attr]
        deadline = expires_at(bot, plan_id)
        await until("the plan's expiry to pass while the bot is down", lambda: time.time() > deadline,
                    timeout_s=30)
        await bot.start()
        await assert_shown_expired_and_host_freed(bot, plan, plan_id)


async def test_plan_pending_at_a_restart_expires_on_its_rearmed_timer(lab: DemoHost, tmp_path: Path) -> None:
    # Long enough for the bot to be back before the plan expires (what a re-armed timer is for); the
    # outcome asserted is the same either way, so a slow start cannot make this test fail.
    host = fresh(lab)
    async with running_bot(host, tmp_path, host.inventory(), expire_after_s=8) as bot:
        plan, plan_id = await bot.plan_awaiting_approval()
        await bot.restart_after_sigkill()
        await assert_shown_expired_and_host_freed(bot, plan, plan_id)


async def test_operation_running_at_sigkill_is_marked_interrupted_and_offers_verify_now(
        clean_host: DemoHost, tmp_path: Path) -> None:
    host = clean_host  # the session's: a verify only reads it
    async with DelayProxy("127.0.0.1", host.ssh_port, delay_s=0.4) as proxy:
        async with running_bot(host, tmp_path, via_port(host, proxy.port, tmp_path)) as bot:
            await bot.command("/verify", host.name)
            await bot.slack.wait_until(lambda: bool(bot.slack.messages_in(CHANNEL)), what="the parent message")
            parent = bot.slack.messages_in(CHANNEL)[0]
            # Another process writes the DB: polling is the only way to see it.
            async with asyncio.timeout(30):  # a bot that never records it fails here, not at the suite timeout
                while not any(kind == "requested" for kind, _, _ in bot.events()):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            bot.kill()
            await bot.process.wait()  # type: ignore[union-attr]
            operation_id = next(op for kind, op, _ in bot.events() if kind == "requested")
            proxy.set_delay(0)
            await bot.start()
            await bot.slack.wait_until(lambda: any("interrupted" in m.text
                                                   for m in bot.slack.thread(CHANNEL, parent.ts)),
                                       timeout=20, what="the interrupted note in the thread")
            note = next(m for m in bot.slack.thread(CHANNEL, parent.ts) if "interrupted" in m.text)
            assert "last step recorded" in json.dumps(note.blocks)
            finished = [d for kind, op, d in bot.events() if kind == "finished" and op == operation_id]
            assert finished[0]["verdict"] == "interrupted"
            [verify_now] = buttons(note)
            assert verify_now["value"] == operation_id
            await bot.click(note.ts, "verify_now", operation_id, REQUESTER)
            await bot.slack.wait_until(lambda: any(f"{host.name} verify: PASS" in m.text
                                                   for m in bot.slack.messages_in(CHANNEL)), timeout=30,
                                       what="the new verify")


async def test_bot_killed_during_a_restart_marks_it_interrupted_in_its_thread(tmp_path: Path) -> None:
    slow = ["--speculative-algorithm", "NEXTN", "--startup-delay", "6"]
    async with demo_host("ct129", patched=False, extra_file=False, flags=slow) as host, \
            running_bot(host, tmp_path, host.inventory(expect_flags=[], forbid_flags=[])) as bot:
        plan, plan_id = await bot.plan_awaiting_approval("/restart")
        await bot.click(plan.ts, "restart_approve", plan_id, APPROVER)
        await bot.slack.wait_until(lambda: "verifying" in bot.slack.message(CHANNEL, plan.ts).text, timeout=20,
                                   what="the restart under way")
        await bot.restart_after_sigkill()
        await bot.slack.wait_until(lambda: any("interrupted" in m.text for m in bot.slack.thread(CHANNEL, plan.ts)),
                                   timeout=20, what="the interrupted note in the restart's thread")
        finished = [d for kind, op, d in bot.events() if kind == "finished" and op == plan_id]
        assert [d["verdict"] for d in finished] == ["interrupted"]
        assert any(kind == "lock-released-stale" and op == plan_id for kind, op, _ in bot.events())
        assert bot.lock_of("ct129") is None, "released at start-up, not left to go stale"
        # the host is free again: a new restart plan is made at once
        _, new_plan_id = await bot.plan_awaiting_approval("/restart", but_not=plan_id)
        assert bot.lock_of("ct129") == (new_plan_id, bot.pid)


async def test_serve_in_socket_mode_acks_over_the_socket_and_stops_cleanly(seeded_host: DemoHost,
                                                                           tmp_path: Path) -> None:
    host = seeded_host  # the session's: `/verify help` does not touch it
    async with FakeSlack(channels=INVITED) as slack:
        inventory = write_inventory(tmp_path / "inventory.yml", host.inventory())
        bot = await start_serve(slack, inventory, tmp_path / "a.db", stdout=asyncio.subprocess.DEVNULL,
                                stderr=asyncio.subprocess.DEVNULL)  # Socket Mode
        try:
            await slack.wait_for_socket(timeout=20)
            ack = await (await slack.socket_send_slash_command("/verify", "help", channel_id=CHANNEL)).wait()
            assert "/verify HOST|GROUP... [BACKUP]" in json.dumps(ack.payload)  # ack latency: bench/timing_bench.py
        finally:
            await stop_serve(bot)
        assert bot.returncode == 0
        kinds = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute("SELECT kind FROM events ORDER BY id")]
        assert kinds[0] == "bot-started" and kinds[-1] == "bot-stopped"
