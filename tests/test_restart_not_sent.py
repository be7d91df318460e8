"""A restart records ``restart-sent`` before it sends the command: when the database does not take that write,
nothing is sent (the service keeps its PID and its supervisord start count), the error says "not restarted", and
settling writes the operation's one ending. A restart told to halt (a rollout's sibling failed) sends nothing
either and ends refused. One loopback lab host (real sshd and supervisord), SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, demo_host
from commands.errors import CouldNotRecord
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.restart.act import NotSent, restart
from commands.restart.plan import plan_restart
from commands.store import locks
from commands.store.db import AuditStore
from commands.store.recovery import UNRECORDED, settle_unrecorded
from commands.vocabulary import EventKind
from tests.store_sql import rows
from tests.test_interrupted_truth import RefusedWrites
from tests.test_replicas import main_pid, starts

REFUSE_RESTART_SENT = """
CREATE TRIGGER refuse_restart_sent BEFORE INSERT ON events
WHEN NEW.kind = 'step' AND json_extract(NEW.details, '$.step') = 'restart-sent'
BEGIN SELECT RAISE(ABORT, 'injected'); END
"""


@pytest_asyncio.fixture(scope="module")
async def host() -> AsyncIterator[tuple[DemoHost, Inventory]]:
    async with demo_host("ct138") as made:
        yield made, parse_inventory(yaml.safe_dump(made.inventory()), "i.yml")


async def test_restart_sent_not_recorded_means_not_restarted(host: tuple[DemoHost, Inventory],
                                                             tmp_path: Path) -> None:
    lab, inventory = host
    db = tmp_path / "a.db"
    store = AuditStore.open(db)
    try:
        plan = await plan_restart(inventory.host("ct138"), operation_id="op-unsent")
        pid, started = await main_pid(lab), starts(lab)
        await store.write(lambda db: db.execute(REFUSE_RESTART_SENT))
        store.write = RefusedWrites(store)  # type: ignore[method-assign]
        with pytest.raises(CouldNotRecord) as failed:
            await restart(plan, origin=Origin("cli:t", "cli"), audit=store)
        assert failed.value.message.startswith("not restarted: proofbot could not record it"), failed.value.message
        assert "same PID" in failed.value.hint and "injected" in failed.value.message
        assert await main_pid(lab) == pid and starts(lab) == started, "nothing was sent: same PID, no new start"
        kinds = "SELECT kind, json_extract(details, '$.step') FROM events WHERE operation_id = 'op-unsent'"
        assert rows(db, kinds) == [(EventKind.REQUESTED, None), (EventKind.STEP, "before")], "nothing after it"
        await store.write(lambda db: db.execute("DROP TRIGGER refuse_restart_sent"))  # the database is back
        settled = await settle_unrecorded(store)
        assert [(op.operation_id, op.reason, op.last_step) for op in settled] == [
            ("op-unsent", UNRECORDED, "before")]
        assert rows(db, "SELECT json_extract(details, '$.verdict') FROM events WHERE operation_id = 'op-unsent' "
                        "AND kind = 'finished'") == [("interrupted",)], "exactly one ending"
        assert await locks.holder_of(store, "ct138") is None
    finally:
        store.close()


async def test_a_restart_told_to_halt_sends_nothing_and_ends_refused(host: tuple[DemoHost, Inventory],
                                                                    tmp_path: Path) -> None:
    lab, inventory = host
    db = tmp_path / "a.db"
    store = AuditStore.open(db)
    try:
        plan = await plan_restart(inventory.host("ct138"), operation_id="op-halted")
        pid, started = await main_pid(lab), starts(lab)
        with pytest.raises(NotSent, match="not restarted: ct137's part failed; nothing was sent to ct138"):
            await restart(plan, origin=Origin("cli:t", "cli"), audit=store, halt=lambda: "ct137's part failed")
        assert await main_pid(lab) == pid and starts(lab) == started
        ended = "SELECT kind FROM events WHERE operation_id = 'op-halted' AND kind IN ('refused', 'finished')"
        assert rows(db, ended) == [(EventKind.REFUSED,)]
        assert "restart-sent" not in str(rows(db, "SELECT details FROM events WHERE operation_id = 'op-halted'"))
        assert await locks.holder_of(store, "ct138") is None
    finally:
        store.close()
