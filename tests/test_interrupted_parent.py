"""An interrupted operation's parent message keeps what the user needs: the plan as it was shown (what was
planned, who asked), who approved it and when, and that it was interrupted (why, and that its thread says what is
known); the plan's Approve/Reject are gone, since an interrupted plan can be neither. Against the fake Slack,
which checks every Block Kit payload as Slack would. A verify (no plan) gets the short notice, naming who asked."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import asdict
from pathlib import Path

import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack import restart as slack_restart
from bot.slack.listening import BotContext
from bot.slack.recovery import recover_in_slack, take_over_leases
from bot.slack.restart_blocks import restart_plan_message
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.restart.plan import RestartPlan, ServiceSnapshot
from commands.store import approvals
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore
from commands.store.locks import LockHolder
from commands.store.log import audit_log
from commands.vocabulary import Operation, PlanState
from tests.audit_events import raw_append
from tests.lab.waits import until
from tests.slack_fake.records import Message
from tests.slack_fake.server import FakeSlack
from tests.test_replicas_store import DEAD

CHANNEL = "C0OPS"
APPROVER = "U0APPROVER"


def inventory_of(*names: str) -> Inventory:
    return parse_inventory(yaml.safe_dump({
        "channels": [CHANNEL], "approvals": {"approvers": [APPROVER]},
        "hosts": {name: {"address": "10.0.0.1", "service": {
            "manager": "supervisord", "unit": "sglang", "health_url": "http://127.0.0.1:30000/health"}}
            for name in names}}), "i.yml")


async def interrupted_parent(tmp_path: Path, today: Inventory) -> tuple[Message, PendingPlan]:
    """An approved restart of ct129 whose replica died; the parent as a live replica (its inventory ``today``)
    leaves it once it took the restart over."""
    inventory = inventory_of("ct129")
    plan = RestartPlan("op-dead", inventory.hosts["ct129"], ServiceSnapshot(4242, True, "RUNNING"))
    store = AuditStore.open(tmp_path / "a.db")
    try:
        async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
            text, blocks = restart_plan_message(plan, "U0REQ", "2026-12-02T06:00:00Z", [APPROVER])
            parent = str((await client.chat_postMessage(channel=CHANNEL, text=text, blocks=blocks))["ts"])
            await approvals.create(store, plan_id="op-dead", operation=Operation.RESTART, host="ct129",
                                   requested_by="slack:U0REQ", plan_hash=plan.plan_hash, details=plan.to_json(),
                                   approvals=inventory.approvals, channel=CHANNEL, message_ts=parent)
            await audit_log(store, Operation.RESTART, "op-dead", "ct129", "slack:U0REQ").requested(
                Origin("slack:U0REQ", "slack", CHANNEL, parent))
            decided = await approvals.decide(store, "op-dead", f"slack:{APPROVER}", PlanState.APPROVED,
                                             inventory.approvals, user_id=APPROVER)
            # The replica that ran it died mid-restart: its lease on the host ended unrenewed.
            lock = LockHolder("ct129", "op-dead", Operation.RESTART, "slack:U0REQ", 1, "replica-b",
                              "2026-12-01T00:00:00Z", lease_holder=DEAD, lease_expires=time.time() - 1)
            await store.write(lambda db: db.table("locks").insert(asdict(lock)))
            context = BotContext(today, store)
            context.approvables["restart"] = slack_restart.APPROVABLE
            turns = asyncio.create_task(take_over_leases(context, client, every_s=0.05))
            try:
                await until("the parent updated", lambda: "interrupted" in slack.message(CHANNEL, parent).text)
            finally:
                turns.cancel()
                await asyncio.gather(turns, return_exceptions=True)
            return slack.message(CHANNEL, parent), decided
    finally:
        store.close()


async def test_a_restart_interrupted_keeps_its_plan_and_who_approved_on_its_parent(tmp_path: Path) -> None:
    shown, decided = await interrupted_parent(tmp_path, inventory_of("ct129"))
    said = json.dumps(shown.blocks)
    assert shown.text.startswith("restart of ct129: interrupted (the proofbot replica running this stopped"), \
        shown.text
    assert "Restart plan for ct129" in said and "requested by <@U0REQ>" in said, "what was planned, by whom"
    assert "4242" in said, "the process it was planned against"
    assert f"approved by <@{APPROVER}> at {decided.decided_at}" in said, "who approved, when"
    assert "*interrupted* (the proofbot replica running this stopped (its lease ended))" in said, said
    assert "what is known is in this thread" in said and "op-dead" in said
    assert not [b for b in shown.blocks if b.get("type") == "actions"], "Approve/Reject can no longer work"


async def test_a_plan_that_no_longer_rebuilds_leaves_the_short_notice(tmp_path: Path) -> None:
    """ct129 gone from the live replica's inventory: its plan cannot be shown as it was; the notice alone."""
    shown, _ = await interrupted_parent(tmp_path, inventory_of("ct130"))
    assert shown.text.startswith("restart of ct129: interrupted (the proofbot replica running this stopped")
    assert "Restart plan" not in json.dumps(shown.blocks) and "what is known is in this thread" in shown.text
    assert not [b for b in shown.blocks if b.get("type") == "actions"]


async def test_a_verify_interrupted_names_who_asked_on_its_parent(tmp_path: Path) -> None:
    """A verify has no plan to keep: its parent is the short notice, and it names who asked, as every parent does
    (a host's verify and a fleet's, each whose bot died mid-run)."""
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()  # a process that certainly ended: the bot that ran them
    store = AuditStore.open(tmp_path / "a.db")
    try:
        async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
            parents = {}
            for operation_id, host, actor, fleet in (("op-host", "ct129", "slack:U0ALICE", None),
                                                      ("op-fleet", None, "slack:U0BOB", {"target": "gpu-west",
                                                                                        "hosts": ["ct130"]})):
                parent = str((await client.chat_postMessage(channel=CHANNEL, text="verify: checking…"))["ts"])
                origin = {"actor": actor, "via": "slack", "channel": CHANNEL, "thread_ts": parent,
                          "process": {"machine": socket.gethostname(), "pid": gone.pid, "started": None}}
                await raw_append(store, "requested", operation_id=operation_id, operation="verify", host=host,
                                 actor=actor, details={"origin": origin, **({"fleet": fleet} if fleet else {})})
                parents[operation_id] = parent
            await recover_in_slack(BotContext(inventory_of("ct129", "ct130"), store), client)
            shown = {operation_id: slack.message(CHANNEL, parent) for operation_id, parent in parents.items()}
    finally:
        store.close()
    for operation_id, (what, mention, actor) in {"op-host": ("verify of ct129", "<@U0ALICE>", "slack:U0ALICE"),
                                                 "op-fleet": ("verify of gpu-west", "<@U0BOB>", "slack:U0BOB")}.items():
        message = shown[operation_id]
        assert message.text.startswith(f"{what}: interrupted (proofbot stopped)"), message.text
        assert f"requested by {actor}" in message.text, message.text
        assert f"requested by {mention}" in json.dumps(message.blocks), message.blocks
