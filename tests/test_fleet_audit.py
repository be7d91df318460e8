"""Tier 1: a fleet verify in the audit trail: one line across hosts with its counts, each host's part under
that host naming its fleet, the chain intact, the operations view, and a fleet whose process died."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.cli.trail_text import render_operations
from bot.demo.host import DemoHost
from bot.slack.audit_blocks import audit_operation_message, interrupted_message
from bot.slack.listening import BotContext
from bot.slack.recovery import recover_in_slack
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from commands.store.recovery import recover
from commands.store.trail import recent_operations
from commands.verify.rerun import not_passing
from tests.audit_events import raw_append
from tests.conftest import REPO, run_cli
from tests.fleet_rig import fleet_document, fleet_entry, proxied_known_hosts
from tests.lab.proxy import DelayProxy
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack

INVENTORY = "channels: [C0OPS]\nhosts:\n  ct129: {address: 10.0.0.1}\n  ct130: {address: 10.0.0.2}\n"


def _inventory(tmp_path: Path, seeded_host: DemoHost, clean_host: DemoHost, **fleet: Any) -> Path:
    path = tmp_path / "inventory.yml"
    hosts = {"ct129": fleet_entry(seeded_host), "ct130": fleet_entry(clean_host), "ct131": fleet_entry(clean_host)}
    path.write_text(fleet_document(hosts, clean_host, **fleet))
    return path


def _query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


def _hosts_finished(db: Path) -> int:
    try:
        return len(_query(db, "SELECT 1 FROM events WHERE kind = 'finished' AND host IS NOT NULL"))
    except sqlite3.OperationalError:  # the CLI has not created the tables yet
        return 0


async def test_a_fleet_is_one_line_across_hosts_and_each_host_lists_its_part(
        seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> None:
    where = ["--inventory", str(_inventory(tmp_path, seeded_host, clean_host)), "--db", str(tmp_path / "a.db")]
    fleet_run = await run_cli("verify", "gpu-west", "--json", *where)
    assert fleet_run.code == 1, fleet_run.stderr
    fleet_id = json.loads(fleet_run.stdout)["operation_id"]
    assert (await run_cli("verify", "ct130", *where)).code == 0

    across = await run_cli("audit", "--json", *where)
    operations = json.loads(across.stdout)["operations"]
    assert [(op["operation"], op["host"]) for op in operations] == [("verify", "ct130"), ("verify", None)]
    assert operations[1]["operation_id"] == fleet_id and operations[1]["verdict"] == "fail"
    assert operations[1]["fleet"] == {"operation_id": fleet_id, "target": "gpu-west", "hosts": 3,
                                      "counts": {"fail": 1, "pass": 2}}
    assert operations[0]["fleet"] is None and operations[0]["part_of"] is None
    text = (await run_cli("audit", *where)).stdout
    assert "Audit trail across hosts: last 2 operations" in text
    assert f"verify gpu-west (3 hosts): FAIL · 2 pass · 1 fail   ({fleet_id})" in text

    mine = json.loads((await run_cli("audit", "ct130", "--json", *where)).stdout)["operations"]
    assert [op["part_of"] and op["part_of"]["operation_id"] for op in mine] == [None, fleet_id]
    assert mine[1]["part_of"]["target"] == "gpu-west" and mine[1]["verdict"] == "pass"
    part = (await run_cli("audit", "ct129", *where)).stdout
    assert f"verify ct129: FAIL · part of verify gpu-west ({fleet_id})" in part

    chain = await run_cli("audit", "verify", *where)
    assert chain.code == 0 and "chain intact" in chain.stdout
    view = _query(tmp_path / "a.db", "SELECT host, fleet_target, fleet_hosts, fleet_operation_id, verdict "
                                     "FROM operations WHERE operation = 'verify' ORDER BY requested_at, host")
    assert (None, "gpu-west", 3, None, "fail") in view
    assert sorted(row[0] for row in view if row[3] == fleet_id) == ["ct129", "ct130", "ct131"]


async def test_slack_audit_reply_for_a_fleet_and_for_a_hosts_part(
        seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> None:
    where = ["--inventory", str(_inventory(tmp_path, seeded_host, clean_host)), "--db", str(tmp_path / "a.db")]
    assert (await run_cli("verify", "gpu-west", *where)).code == 1
    store = AuditStore.open(tmp_path / "a.db")
    try:
        (fleet,) = await recent_operations(store)
        part, = await recent_operations(store, "ct129")
    finally:
        store.close()
    text, blocks = audit_operation_message(fleet, None)
    assert "verify gpu-west (3 hosts): FAIL · 2 pass · 1 fail · requested by" in text
    assert "*verify gpu-west (3 hosts)*: *FAIL* · 2 pass · 1 fail" in json.dumps(blocks, ensure_ascii=False)
    text, _ = audit_operation_message(part, None)
    assert f"verify ct129: FAIL · part of verify gpu-west ({fleet.operation_id})" in text


async def test_a_fleet_whose_process_died_is_interrupted_once_with_its_unfinished_hosts(
        seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        proxy.blackhole()
        hosts = {"ct129": fleet_entry(seeded_host), "ct130": fleet_entry(clean_host),
                 "ct131": fleet_entry(clean_host, proxy.port,
                                      proxied_known_hosts(clean_host, proxy.port, tmp_path / "kh"))}
        # The black-holed host must still hang when the others finish, however slow the machine: its connect
        # waits out the kill (the template's 5 s connect timeout could end it first on a loaded machine).
        hosts["ct131"]["ssh"]["connect_timeout_s"] = 250
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(fleet_document(hosts, clean_host, host_deadline_s=300))
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "verify", "gpu-west", "--inventory", str(inventory), "--db", str(db),
            cwd=REPO, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        try:
            await until("two hosts finished, the black-holed one still hanging",
                        lambda: _hosts_finished(db) == 2, 60)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            await child.wait()
    store = AuditStore.open(db)
    try:
        interrupted, _ = await recover(store)
        (fleet,) = await recent_operations(store)
        (hung,) = await recent_operations(store, "ct131")
        (done,) = await recent_operations(store, "ct130")
        again = await not_passing(store, fleet.operation_id)
    finally:
        store.close()
    assert again.hosts == ["ct129", "ct131"]  # the patched host failed; the hung one never finished
    assert again.of_total == 3
    assert sorted((op.fleet_target, op.host) for op in interrupted if op.fleet_operation_id is None) == [
        ("gpu-west", None)]
    assert [op.host for op in interrupted if op.fleet_operation_id] == ["ct131"]
    assert fleet.verdict == "interrupted" and fleet.fleet is not None and fleet.fleet.target == "gpu-west"
    assert hung.verdict == "interrupted" and done.verdict == "pass"
    text, blocks = interrupted_message(next(op for op in interrupted if op.fleet_target))
    assert text == "proofbot restarted: verify of gpu-west was interrupted"
    (button,) = blocks[-1]["elements"]  # the hosts are read from the audit log on the click, as for a finished one
    assert (button["action_id"], button["value"]) == ("fleet_reverify", fleet.operation_id)
    assert button["text"]["text"] == "Re-verify the hosts that did not pass"
    chain = await run_cli("audit", "verify", "--db", str(db))
    assert chain.code == 0, chain.stdout


async def test_after_a_restart_only_the_fleets_thread_is_told(tmp_path: Path) -> None:
    """A Slack fleet whose bot died mid-run: one message, in the fleet's thread, none per host."""
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()  # a process that certainly ended: the bot that ran the fleet
    store = AuditStore.open(tmp_path / "a.db")
    try:
        async with FakeSlack(channels={"C0OPS": "ops"}) as slack:
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
            parent = str((await client.chat_postMessage(channel="C0OPS", text="verify gpu-west: 1/2 hosts"))["ts"])
            origin = {"actor": "slack:U0ALICE", "via": "slack", "channel": "C0OPS", "thread_ts": parent,
                      "process": {"machine": socket.gethostname(), "pid": gone.pid, "started": None}}
            await raw_append(store, "requested", operation_id="op-fleet", operation="verify", host=None,
                               actor="slack:U0ALICE",
                               details={"fleet": {"target": "gpu-west", "hosts": ["ct129", "ct130"]}, "origin": origin})
            for host in ("ct129", "ct130"):
                await raw_append(store, "requested", operation_id=f"op-{host}", operation="verify", host=host,
                                   actor="slack:U0ALICE", details={"fleet_operation_id": "op-fleet", "origin": origin})
            await raw_append(store, "finished", operation_id="op-ct129", operation="verify", host="ct129",
                               actor="slack:U0ALICE", details={"verdict": "pass"})
            slack.calls.clear()
            interrupted = await recover_in_slack(BotContext(parse_inventory(INVENTORY, "i.yml"), store), client)
            posted = [call.args for call in slack.calls_to("chat.postMessage")]
    finally:
        store.close()
    assert sorted(op.operation_id for op in interrupted) == ["op-ct130", "op-fleet"]
    assert [(args["channel"], args["thread_ts"], args["text"]) for args in posted] == [
        ("C0OPS", parent, "proofbot restarted: verify of gpu-west was interrupted")]


async def test_re_verifying_an_interrupted_fleet_takes_the_hosts_not_passed_each_with_its_planned_backup(
        tmp_path: Path) -> None:
    """A host that never started is re-verified too, against the backup the fleet planned for it."""
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()  # the process that ran the fleet, certainly ended
    origin = {"actor": "cli:ops", "via": "cli",
              "process": {"machine": socket.gethostname(), "pid": gone.pid, "started": None}}
    store = AuditStore.open(tmp_path / "a.db")
    try:
        await raw_append(store, "requested", operation_id="op-fleet", operation="verify", host=None, actor="cli:ops",
                           details={"fleet": {"target": "gpu-west", "hosts": ["ct129", "ct130", "ct131"],
                                              "backups": {"ct129": "pre-a", "ct130": "pre-b", "ct131": "pre-c"}},
                                    "origin": origin})
        for host, backup in (("ct129", "pre-a"), ("ct130", "pre-b")):
            await raw_append(store, "requested", operation_id=f"op-{host}", operation="verify", host=host,
                               actor="cli:ops", details={"fleet_operation_id": "op-fleet", "backup": backup,
                                                         "origin": origin})
        await raw_append(store, "finished", operation_id="op-ct129", operation="verify", host="ct129", actor="cli:ops",
                           details={"verdict": "pass"})
        await recover(store)
        again = await not_passing(store, "op-fleet")
    finally:
        store.close()
    assert again.hosts == ["ct130", "ct131"]  # ct130 was cut off, ct131 never started
    assert again.backups == {"ct130": "pre-b", "ct131": "pre-c"}
    assert again.of_total == 3


async def test_any_fleet_operation_reads_as_one_line_with_its_own_counts(tmp_path: Path) -> None:
    """A rolling restart records its fleet the same way, with its own outcomes (done, failed, untouched)."""
    store = AuditStore.open(tmp_path / "a.db")
    try:
        common: dict[str, Any] = {"operation_id": "op-roll", "operation": "rollout", "host": None,
                                  "actor": "root@ops1"}
        await raw_append(store, "requested", **common, details={
            "fleet": {"target": "gpu-west", "hosts": ["ct1", "ct2", "ct3", "ct4"]}, "origin": {"via": "cli"}})
        await raw_append(store, "finished", **common, details={
            "verdict": "fail", "counts": {"done": 2, "failed": 1, "untouched": 1}})
        records = await recent_operations(store)
    finally:
        store.close()
    assert "rollout gpu-west (4 hosts): FAIL · 2 done · 1 failed · 1 untouched   (op-roll)" in render_operations(
        records, None)
