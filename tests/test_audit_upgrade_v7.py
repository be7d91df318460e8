"""A DB written by proofbot before the typed vocabulary (commit 85999f8, schema 7) opens, upgrades and
verifies, and the views read its old rows as they read the rows written now.

tests/recorded/audit_v7_85999f8.db was written at commit 85999f8 by `proofbot demo` and then
tests/recorded/make_audit_v7_85999f8.py (which says how): the demo's six operations, a CLI refusal, a
Slack refusal in the old `{reason, text, channel}` shape (the old `refusals` view gave it no host and no
front-end), a restore plan refused and one cancelled, a verify interrupted by recovery, and a rollout
whose planning failed. The values below were read from it with that commit's code.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from bot.cli.session import Session
from commands.errors import UsageError
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.plans import PlanRequest, request_plan, withdraw
from commands.store.chain import verify_chain
from commands.store.db import AuditStore
from commands.store.migrations import MIGRATIONS
from commands.store.recovery import recover
from commands.vocabulary import Operation
from tests.conftest import REPO

FIXTURE = Path(__file__).parent / "recorded" / "audit_v7_85999f8.db"
FIXTURE_VERSION = 7
EVENTS = 85
HEAD_HASH = "88610f5ef5885dd5f5456b8175c859416c49bfec9cb76bcef86b5f0987acfdf2"
REFUSALS = ("SELECT event_id, operation, requested_host, via, reason FROM refusals WHERE kind = 'refused' "
            "ORDER BY event_id")
OLD_REFUSALS = [  # what the view gave at 85999f8: the Slack row (75) and the plan refused (78) name no front-end
    (74, "verify", "ct999", "cli", "unknown host 'ct999' (see inventory.yml)"),
    (75, "restore", None, None, "you are not allowed to run restore"),
    (78, "restore", None, None, "no terminal to ask for approval on (pass --yes)"),
]
OPERATIONS = "SELECT operation_id, operation, verdict, finished_at IS NOT NULL, approval FROM operations"
REQUESTED_THEN_DIED = """
import asyncio, sys
from pathlib import Path
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.log import audit_log

async def main() -> None:
    store = AuditStore.open(Path(sys.argv[1]))
    origin = Origin(actor="root@ops1", via="cli")
    await audit_log(store, "verify", "op-20261201T130000-00b001", "ct129", origin.actor).requested(origin)
    store.close()

asyncio.run(main())
"""
INVENTORY = """
hosts:
  ct129: {address: 127.0.0.1}
"""


def copy_of_fixture(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, path)
    return path


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


def test_the_fixture_is_schema_7_as_85999f8_wrote_it(tmp_path: Path) -> None:
    path = copy_of_fixture(tmp_path)
    versions = [v for (v,) in query(path, "SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == list(range(1, FIXTURE_VERSION + 1))
    assert query(path, REFUSALS) == OLD_REFUSALS


async def test_it_opens_upgrades_and_audit_verify_passes(tmp_path: Path) -> None:
    path = copy_of_fixture(tmp_path)
    AuditStore.open(path).close()
    versions = [v for (v,) in query(path, "SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == list(range(1, len(MIGRATIONS) + 1)) and len(MIGRATIONS) > FIXTURE_VERSION
    run = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "bot.cli.main", "audit", "verify", "--db", str(path)], cwd=REPO,
        capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{EVENTS} events, chain intact" in run.stdout
    store = AuditStore.open(path)
    try:
        report = await verify_chain(store)
    finally:
        store.close()
    assert (report.intact, report.events, report.head_hash) == (True, EVENTS, HEAD_HASH)


def test_old_refusals_show_their_host_and_front_end(tmp_path: Path) -> None:
    path = copy_of_fixture(tmp_path)
    AuditStore.open(path).close()
    assert query(path, REFUSALS) == [
        (74, "verify", "ct999", "cli", "unknown host 'ct999' (see inventory.yml)"),
        (75, "restore", "ct129", "slack", "you are not allowed to run restore"),  # actor slack:U…, text "ct129 …"
        (78, "restore", "ct129", "cli", "no terminal to ask for approval on (pass --yes)"),  # its request's origin
    ]
    assert query(path, "SELECT channel, text FROM refusals WHERE event_id = 75") == [("C0OPS", "ct129 pre-ddtree")]


def test_old_operations_that_ended_without_a_verdict_have_one_and_an_end(tmp_path: Path) -> None:
    path = copy_of_fixture(tmp_path)
    AuditStore.open(path).close()
    ended = {row[0]: row[1:] for row in query(path, OPERATIONS)}
    assert ended["op-20261201T120000-00a001"] == ("restore", "refused", 1, "no approval recorded")
    assert ended["op-20261201T120100-00a002"] == ("restore", "cancelled", 1, "no approval recorded")
    assert ended["op-20261201T120200-00a003"] == ("verify", "interrupted", 1, "no approval needed")
    # a rollout needs an approval (migration 7 said "no approval needed"); its planning failed: refused
    assert ended["op-20261201T120300-00a004"] == ("rollout", "refused", 1, "no approval recorded")
    assert all(verdict is not None and finished for _, verdict, finished, _ in ended.values())


class _Plan:
    """A restore plan as commands.plans handles one (what it holds does not matter to the log)."""

    operation = Operation.RESTORE
    plan_hash = "cd" * 32
    audit_host = "ct129"
    locked_hosts = ("ct129",)

    def __init__(self, operation_id: str) -> None:
        self.operation_id = operation_id

    def to_json(self) -> dict[str, Any]:
        return {"plan_hash": self.plan_hash}


async def test_what_the_writers_write_now_reads_like_the_old_rows(tmp_path: Path) -> None:
    """Refusals by the CLI, a refused and a cancelled plan and an interrupted verify, written through
    today's writers on the upgraded DB, come out of the views as the old rows do."""
    path = copy_of_fixture(tmp_path)
    inventory: Inventory = parse_inventory(INVENTORY, "i.yml")
    origin = Origin(actor="root@ops1", via="cli")
    store = AuditStore.open(path)
    try:
        await Session(inventory, store, origin).refused("verify", "ct998", UsageError("unknown host 'ct998'"))
        plans = []
        for refused in (True, False):
            async def make_plan(operation_id: str) -> _Plan:
                return _Plan(operation_id)
            request = PlanRequest.for_host(Operation.RESTORE, inventory.host("ct129"), {"backup": "pre-ddtree"})
            plan = await request_plan(request, inventory=inventory, origin=origin, audit=store, make_plan=make_plan)
            await withdraw(store, plan, origin.actor, refused=refused, reason="declined")  # type: ignore[arg-type]
            plans.append(plan.operation_id)
        # a verify requested by a process that then died (its request names that process): recovery ends it
        await asyncio.to_thread(subprocess.run, [sys.executable, "-c", REQUESTED_THEN_DIED, str(path)], cwd=REPO,
                                check=True, timeout=120)
        await recover(store)
    finally:
        store.close()
    assert query(path, REFUSALS)[3][1:] == ("verify", "ct998", "cli", "unknown host 'ct998'")
    ended = {row[0]: row[1:] for row in query(path, OPERATIONS)}
    assert ended[plans[0]] == ("restore", "refused", 1, "no approval recorded")
    assert ended[plans[1]] == ("restore", "cancelled", 1, "no approval recorded")
    assert ended["op-20261201T130000-00b001"] == ("verify", "interrupted", 1, "no approval needed")
    assert query(path, f"SELECT via FROM refusals WHERE operation_id = '{plans[0]}'") == [("cli",)]
