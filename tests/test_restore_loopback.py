"""Tier 1: restore planning against a loopback host: what the plan shows, and what it never shows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import yaml

from bot.demo.host import demo_host
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.restore import request_restore
from commands.store.events import AuditStore

SECRET = "sk-live-abcdefghijklmnopqrstuv"


async def test_secrets_in_a_diff_are_masked_in_the_plan_and_the_audit_log(tmp_path: Path) -> None:
    async with demo_host("ct129") as host:
        host.live_dir.joinpath("spec_info.py").write_text(f'OPENAI_API_KEY={SECRET}\nclient(api_key="{SECRET}")\n')
        inventory = parse_inventory(yaml.safe_dump(host.inventory()), "i.yml")
        audit = AuditStore.open(tmp_path / "a.db")
        plan = await request_restore(inventory, inventory.host("ct129"), origin=Origin("cli:t", "cli"), audit=audit)
        audit.close()
    [change] = plan.changes
    assert SECRET not in change.diff and "[REDACTED]" in change.diff
    stored = json.dumps(sqlite3.connect(tmp_path / "a.db").execute("SELECT details FROM events").fetchall())
    assert SECRET not in stored
