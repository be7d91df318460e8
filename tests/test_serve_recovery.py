"""A bot killed with SIGKILL and started again: interrupted operations are said so in their
threads, dead locks are released, and a pending approval can still be approved."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from bot.demo.host import DemoHost, demo_host
from tests.conftest import REPO, via_port, write_inventory
from tests.lab.proxy import DelayProxy
from tests.slack_fake.server import FakeSlack, HttpAck, Message
from tests.slack_fake.signing import block_actions_body, slash_command_body

SECRET = "restart-secret"
CHANNEL = "C0OPS"
INVITED = {CHANNEL: "ops"}
REQUESTER, APPROVER = "U0REQ", "U0APPROVER"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Bot:
    def __init__(self, slack: FakeSlack, inventory: Path, db: Path) -> None:
        self.slack, self.inventory, self.db = slack, inventory, db
        self.port = free_port()
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {**os.environ, "SLACK_BOT_TOKEN": self.slack.bot_token, "SLACK_SIGNING_SECRET": SECRET,
               "PROOFBOT_SLACK_API_URL": self.slack.api_url}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "serve", "--http", str(self.port), "--host", "127.0.0.1",
            "--inventory", str(self.inventory), "--db", str(self.db), cwd=REPO, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
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
            self.process.send_signal(signal.SIGTERM)
            await self.process.wait()

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

    def events(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        rows = sqlite3.connect(self.db).execute("SELECT kind, operation_id, details FROM events ORDER BY id")
        return [(kind, op, json.loads(details)) for kind, op, details in rows]


@asynccontextmanager
async def running_bot(host: DemoHost, tmp_path: Path, document: dict[str, Any]) -> AsyncIterator[Bot]:
    document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False, "expire_after_s": 600}
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


async def test_pending_approval_survives_a_sigkill(tmp_path: Path) -> None:
    async with demo_host("ct129") as host, running_bot(host, tmp_path, host.inventory()) as bot:
        await bot.command("/restore", "ct129")
        await bot.slack.wait_until(lambda: any(buttons(m) for m in bot.slack.messages_in(CHANNEL)), timeout=20,
                                   what="the plan")
        plan = next(m for m in bot.slack.messages_in(CHANNEL) if buttons(m))
        plan_id = buttons(plan)[0]["value"]
        bot.kill()
        await bot.process.wait()  # type: ignore[union-attr]
        await bot.start()
        assert (await bot.click(plan.ts, "restore_approve", plan_id, APPROVER)).status_code == 200
        await bot.slack.wait_until(lambda: "restore: PASS" in bot.slack.message(CHANNEL, plan.ts).text, timeout=30,
                                   what="the restore verdict after the restart")
        assert host.live_dir.joinpath("spec_info.py").read_bytes() == host.backup_dir.joinpath(
            "spec_info.py").read_bytes()
        kinds = [kind for kind, op, _ in bot.events() if op == plan_id]
        assert "interrupted" not in json.dumps([d for _, op, d in bot.events() if op == plan_id])
        assert kinds.count("approved") == 1 and kinds[-1] == "finished"


async def test_operation_running_at_sigkill_is_marked_interrupted_and_offers_verify_now(tmp_path: Path) -> None:
    good_flags = ["--speculative-algorithm", "NEXTN"]
    async with demo_host("ct129", patched=False, extra_file=False, flags=good_flags) as host, \
            DelayProxy("127.0.0.1", host.ssh_port, delay_s=0.4) as proxy:
        async with running_bot(host, tmp_path, via_port(host, proxy.port, tmp_path)) as bot:
            await bot.command("/verify", "ct129")
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
            await bot.slack.wait_until(lambda: any("ct129 verify: PASS" in m.text
                                                   for m in bot.slack.messages_in(CHANNEL)), timeout=30,
                                       what="the new verify")


async def test_bot_killed_during_a_restart_marks_it_interrupted_in_its_thread(tmp_path: Path) -> None:
    slow = ["--speculative-algorithm", "NEXTN", "--startup-delay", "6"]
    async with demo_host("ct129", patched=False, extra_file=False, flags=slow) as host, \
            running_bot(host, tmp_path, host.inventory(expect_flags=[], forbid_flags=[])) as bot:
        await bot.command("/restart", "ct129")
        await bot.slack.wait_until(lambda: any(buttons(m) for m in bot.slack.messages_in(CHANNEL)), timeout=20,
                                   what="the restart plan")
        plan = next(m for m in bot.slack.messages_in(CHANNEL) if buttons(m))
        plan_id = buttons(plan)[0]["value"]
        await bot.click(plan.ts, "restart_approve", plan_id, APPROVER)
        await bot.slack.wait_until(lambda: "verifying" in bot.slack.message(CHANNEL, plan.ts).text, timeout=20,
                                   what="the restart under way")
        bot.kill()
        await bot.process.wait()  # type: ignore[union-attr]
        await bot.start()
        await bot.slack.wait_until(lambda: any("interrupted" in m.text for m in bot.slack.thread(CHANNEL, plan.ts)),
                                   timeout=20, what="the interrupted note in the restart's thread")
        finished = [d for kind, op, d in bot.events() if kind == "finished" and op == plan_id]
        assert [d["verdict"] for d in finished] == ["interrupted"]
        assert any(kind == "lock-released-stale" and op == plan_id for kind, op, _ in bot.events())
        # the host is free again: a new restart plan can be made at once
        reply = await bot.command("/restart", "ct129")
        assert "busy" not in reply.text


async def test_serve_in_socket_mode_acks_over_the_socket_and_stops_cleanly(tmp_path: Path) -> None:
    async with demo_host("ct129") as host, FakeSlack(channels=INVITED) as slack:
        inventory = write_inventory(tmp_path / "inventory.yml", host.inventory())
        env = {**os.environ, "SLACK_BOT_TOKEN": slack.bot_token, "SLACK_APP_TOKEN": slack.app_token,
               "PROOFBOT_SLACK_API_URL": slack.api_url}
        env.pop("SLACK_SIGNING_SECRET", None)
        bot = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "serve", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"),
            cwd=REPO, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            await slack.wait_for_socket(timeout=20)
            ack = await (await slack.socket_send_slash_command("/verify", "help", channel_id=CHANNEL)).wait()
            assert "/verify HOST [BACKUP]" in json.dumps(ack.payload)  # ack latency: bench/timing_bench.py
        finally:
            bot.send_signal(signal.SIGTERM)
            code = await bot.wait()
        assert code == 0
        kinds = [row[0] for row in sqlite3.connect(tmp_path / "a.db").execute("SELECT kind FROM events ORDER BY id")]
        assert kinds[0] == "bot-started" and kinds[-1] == "bot-stopped"
