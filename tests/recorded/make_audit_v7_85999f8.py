"""Writes tests/recorded/audit_v7_85999f8.db with proofbot as it was at commit 85999f8 (schema 7, before
the typed vocabulary): the demo's six operations, then what the demo never writes, each through that
commit's own code or in the exact shape its call site wrote (file:line of that commit):

- a CLI refusal, through ``bot.cli.terminal.Session.refused`` (``{reason, requested_host, origin}``);
- a Slack refusal in bot/slack/app.py:87's shape (``{reason, text, channel}``), for which the old
  ``refusals`` view gave no host and no front-end;
- a restore plan refused and one cancelled at the requester's prompt, through ``commands.plans.withdraw``;
- a verify left running by a process that died, then ``commands.store.recovery.recover`` (interrupted);
- a rollout whose planning failed (commands/restart/rollout.py:212-220's events).

Not a test: run it by hand from a checkout of that commit, e.g.
    git -C /work/main worktree add --detach /tmp/old85 85999f8
    cd /tmp/old85 && PYTHONPATH=/tmp/old85 /work/main/.venv/bin/python -m bot.cli.main demo --db /tmp/old.db
    PYTHONPATH=/tmp/old85 /work/main/.venv/bin/python tests/recorded/make_audit_v7_85999f8.py /tmp/old.db
(this file is copied into that checkout first); the DB is then checkpointed (no -wal beside it).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from bot.cli.terminal import Session
from commands.errors import UsageError
from commands.holder import Holder
from commands.inventory import Approvals, parse_inventory
from commands.operation import Origin
from commands.plans import Decidable, withdraw
from commands.store import approvals, locks
from commands.store.events import AuditStore
from commands.store.recovery import recover

CLI = Origin(actor="root@ops1", via="cli")
INVENTORY = """
hosts:
  ct129: {address: 127.0.0.1}
"""


class _Plan(Decidable):
    operation = "restore"

    def __init__(self, operation_id: str) -> None:
        self.operation_id = operation_id

    @property
    def plan_hash(self) -> str:
        return "ab" * 32

    def to_json(self) -> dict[str, Any]:
        return {"plan_hash": self.plan_hash}

    @property
    def audit_host(self) -> str | None:
        return "ct129"

    @property
    def locked_hosts(self) -> tuple[str, ...]:
        return ("ct129",)

    @classmethod
    def load(cls, inventory: Any, pending: Any) -> _Plan:
        raise NotImplementedError


async def _withdrawn(store: AuditStore, operation_id: str, *, refused: bool) -> None:
    """plans.request_plan's events and lock, then the front-end declining (as bot/cli/terminal.py did)."""
    plan = _Plan(operation_id)
    await locks.acquire(store, "ct129", operation_id, "restore", CLI.actor)
    await store.append("requested", operation_id=operation_id, operation="restore", host="ct129", actor=CLI.actor,
                       details={"backup": "pre-ddtree", "undo": None, "origin": CLI.to_json()})
    await store.append("plan-shown", operation_id=operation_id, operation="restore", host="ct129", actor=CLI.actor,
                       details=plan.to_json())
    await approvals.create(store, plan_id=operation_id, operation="restore", host="ct129", requested_by=CLI.actor,
                           plan_hash=plan.plan_hash, details=plan.to_json(), approvals=Approvals())
    reason = "no terminal to ask for approval on (pass --yes)" if refused else "not approved at the prompt"
    await withdraw(store, plan, CLI.actor, refused=refused, reason=reason)


async def main(path: Path) -> None:
    store = AuditStore.open(path)
    try:
        session = Session(parse_inventory(INVENTORY, "i.yml"), store, CLI)
        await session.refused("verify", "ct999", UsageError("unknown host 'ct999'", hint="see inventory.yml"))
        await store.append("refused", operation="restore", operation_id=None, actor="slack:U0MALLORY",
                           details={"reason": "you are not allowed to run restore", "text": "ct129 pre-ddtree",
                                    "channel": "C0OPS"})
        await _withdrawn(store, "op-20261201T120000-00a001", refused=True)
        await _withdrawn(store, "op-20261201T120100-00a002", refused=False)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])  # noqa: ASYNC220 (written once, by hand)
        dead.wait()
        gone = {**CLI.to_json(), "process": {**Holder.current().to_json(), "pid": dead.pid}}
        await store.append("requested", operation_id="op-20261201T120200-00a003", operation="verify", host="ct129",
                           actor=CLI.actor, details={"backup": "pre-ddtree", "checks": ["main-pid"], "origin": gone})
        await recover(store)
        fleet = {"target": "gpu-west", "hosts": ["ct129"], "restart_batch": 1, "max_parallel": 8,
                 "host_deadline_s": 120.0}
        await store.append("requested", operation_id="op-20261201T120300-00a004", operation="rollout", host=None,
                           actor=CLI.actor, details={"fleet": fleet, "origin": CLI.to_json()})
        await store.append("finished", operation_id="op-20261201T120300-00a004", operation="rollout", host=None,
                           actor=CLI.actor, details={"verdict": "refused",
                                                     "summary": "planning failed: ct129 is busy"})
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    print(json.dumps({"written": str(path)}))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
