"""serve's background tasks (the Home refresher, plan-expiry timers): held until done, a failure logged when
it ends, never an exception nobody retrieved (which asyncio reports at garbage collection, at any point)."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path

import pytest

from bot.slack.listening import BotContext
from commands.inventory import parse_inventory
from commands.store.db import AuditStore

INVENTORY = "hosts:\n  ct129: {address: 10.0.0.1}\n"


async def _fails() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("cannot schedule new futures after shutdown")


async def _sleeps() -> None:
    await asyncio.sleep(3600)


def test_a_failed_background_task_is_logged_and_released(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = AuditStore.open(tmp_path / "a.db")
    context = BotContext(parse_inventory(INVENTORY, "i.yml"), store)
    unretrieved: list[str] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx["message"]))
        failing = context.keep(asyncio.create_task(_fails(), name="home-refresher"))
        sleeping = context.keep(asyncio.create_task(_sleeps(), name="expiry"))
        await asyncio.wait([failing])
        sleeping.cancel()
        await asyncio.wait([sleeping])
        del failing, sleeping
        gc.collect()  # a failed task nobody retrieved is reported here, when it is collected

    try:
        with caplog.at_level(logging.WARNING, logger="proofbot.slack"):
            asyncio.run(scenario())
    finally:
        store.close()
    assert context.timers == set()
    assert [r.getMessage() for r in caplog.records] == [
        "background task home-refresher failed: RuntimeError('cannot schedule new futures after shutdown')"]
    assert unretrieved == []
