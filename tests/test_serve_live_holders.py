"""A starting bot touches only operations whose process provably died: a CLI restart running
meanwhile keeps its lock and finishes; a second ``serve`` on the same database refuses to start."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from bot.demo.host import demo_host
from commands.holder import Holder
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.recovery import recover
from tests.audit_events import raw_append
from tests.conftest import run_cli, write_inventory
from tests.lab.waits import until
from tests.serve_rig import free_port, kinds, start_serve, stop_serve
from tests.slack_fake.server import FakeSlack

SECRET = "live-holders-secret"


async def dead_pid() -> int:
    child = await asyncio.create_subprocess_exec("true")
    await child.wait()
    return child.pid


async def test_recovery_leaves_an_operation_whose_process_is_alive(store_target: Path | str) -> None:
    audit = AuditStore.open(store_target)
    alive = Origin.local_user().to_json()
    dead = {**alive, "process": {**Holder.current().to_json(), "pid": await dead_pid()}}
    for operation_id, origin in (("op-alive", alive), ("op-dead", dead)):
        await raw_append(audit, "requested", operation_id=operation_id, operation="verify", host="ct1", actor="t",
                           details={"origin": origin})
    interrupted, _ = await recover(audit)
    assert [op.operation_id for op in interrupted] == ["op-dead"]
    assert [e.kind for e in await audit.events_of("op-alive")] == ["requested"]
    audit.close()


async def test_serve_started_during_a_cli_restart_leaves_it_to_finish(tmp_path: Path) -> None:
    slow = ["--speculative-algorithm", "NEXTN", "--startup-delay", "4"]
    async with demo_host("ct140", patched=False, extra_file=False, flags=slow) as host, \
            FakeSlack(channels={"C0OPS": "ops"}, signing_secret=SECRET) as slack:
        inventory = write_inventory(tmp_path / "inventory.yml", host.inventory())
        db = tmp_path / "audit.db"
        cli = asyncio.create_task(run_cli("restart", "ct140", "--yes", "--inventory", str(inventory), "--db", str(db)))
        await until("the CLI restart to be sent", lambda: db.exists() and "step" in kinds(db), 60)
        bot = await start_serve(slack, inventory, db, await free_port())
        try:
            await until("the bot to start", lambda: "bot-started" in kinds(db), 30)
            run = await cli
        finally:
            await stop_serve(bot)
    assert run.code == 0, run.stdout + run.stderr
    [restart] = [op for (op,) in sqlite3.connect(db).execute(
        "SELECT operation_id FROM events WHERE kind = 'requested' AND operation = 'restart'")]
    assert "interrupted" not in kinds(db, restart) and kinds(db, restart)[-1] == "finished"
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM locks").fetchone()[0] == 0


async def test_a_second_serve_on_one_database_refuses_naming_the_first(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", {"hosts": {"ct1": {"address": "127.0.0.1"}}})
    db = tmp_path / "audit.db"
    async with FakeSlack(channels={"C0OPS": "ops"}, signing_secret=SECRET) as slack:
        first = await start_serve(slack, inventory, db, await free_port())
        try:
            await until("the first bot to start", lambda: db.exists() and "bot-started" in kinds(db), 30)
            assert (await run_cli("serve", "--check", "--db", str(db))).code == 0
            second = await start_serve(slack, inventory, db, await free_port())
            said = await stop_serve(second, signal_number=None, timeout_s=30)  # killed if it started after all
        finally:
            await stop_serve(first)
    check = await run_cli("serve", "--check", "--db", str(db))  # the container health check, once stopped
    assert check.code == 1
    assert second.returncode == 4, said
    assert f"pid {first.pid}" in said and "one serve per audit database" in said
    assert kinds(db).count("bot-started") == 1
