"""A real ``proofbot serve --metrics-port`` process: /metrics answers on 127.0.0.1 only (the default address),
counts its own start in the audit chain, and with PROOFBOT_LOG_FORMAT=json every line it logs is one JSON
object; the port is closed once it stops."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import write_inventory
from tests.lab.waits import until
from tests.serve_rig import free_port, start_serve, stop_serve
from tests.slack_fake.server import FakeSlack


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hexport = local.partition(":")
                if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                    found.add(address)
    return found


async def chain_events(url: str) -> float | None:
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            text = (await client.get(url, timeout=5)).text
    except httpx.HTTPError:
        return None
    return next((s.value for f in text_string_to_metric_families(text) for s in f.samples
                 if s.name == "proofbot_audit_chain_events"), None)


async def test_serve_metrics_on_loopback_and_json_logs(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "inventory.yml", {"hosts": {"ct1": {"address": "127.0.0.1"}}})
    metrics_port = await free_port()
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    async with FakeSlack(channels={"C0OPS": "ops"}) as slack:
        bot = await start_serve(slack, inventory, tmp_path / "audit.db", await free_port(),
                                args=["--metrics-port", str(metrics_port)], env={"PROOFBOT_LOG_FORMAT": "json"})
        try:
            seen: list[float | None] = []

            async def started() -> bool:
                seen.append(await chain_events(url))
                return seen[-1] == 1  # bot-started, recorded once Slack took the token

            deadline = asyncio.get_running_loop().time() + 60
            while not await started():
                assert asyncio.get_running_loop().time() < deadline, f"no bot-started in the metrics: {seen}"
                await asyncio.sleep(0.1)
            assert listening_addresses(metrics_port) == {"0100007F"}  # 127.0.0.1, nothing else
        finally:
            said = await stop_serve(bot, timeout_s=30)
    assert bot.returncode == 0, said
    lines = said.splitlines()
    entries = [json.loads(line) for line in lines]  # every line one JSON object
    assert any(e["event"] == f"proofbot metrics at {url}" for e in entries), lines
    assert all({"ts", "level", "logger", "event", "operation_id", "host"} <= set(e) for e in entries)
    await until("the metrics port closed", lambda: not listening_addresses(metrics_port), timeout_s=10)
