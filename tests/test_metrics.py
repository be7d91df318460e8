"""serve's /metrics: the real bolt app and the metrics server on loopback, a /verify, a /restart approved, an
unreachable host, a Slack error and a 429; each scrape read with prometheus-client's own text parser and held
against what happened (the audit log, the fake Slack's records)."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import httpx
import pytest
import pytest_asyncio
import yaml
from prometheus_client.parser import text_string_to_metric_families
from slack_sdk.errors import SlackApiError

from bot.demo.host import demo_host
from bot.metrics import Metrics, start_metrics_server
from bot.slack.app import BotContext, build_app
from bot.slack.redacting import RedactingWebClient
from commands.errors import UsageError
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.lab.waits import until
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.test_slack_restore import APPROVER, CHANNEL, SECRET, Rig

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class MetricsRig:
    rig: Rig
    app_client: object
    metrics_url: str
    rig_context: BotContext
    text: str = ""

    async def scrape(self) -> Samples:
        async with httpx.AsyncClient(trust_env=False) as client:
            response = await client.get(self.metrics_url, timeout=10)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
        self.text = response.text
        return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(response.text) for sample in family.samples}

    def db_rows(self, sql: str) -> list[tuple[object, ...]]:
        with sqlite3.connect(self.rig.db) as conn:
            return conn.execute(sql).fetchall()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens there


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def metrics_rig(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MetricsRig]:
    tmp_path = tmp_path_factory.mktemp("metrics")
    async with demo_host("ct129", flags=["--speculative-algorithm", "NEXTN"]) as host:
        document = host.inventory()
        document["approvals"] = {"approvers": [APPROVER], "allow_self_approval": False, "expire_after_s": 900}
        down = dict(document["hosts"]["ct129"], port=closed_port())
        down.pop("service")
        document["hosts"]["ct130"] = down
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        context = BotContext(inventory, audit)
        metrics = Metrics(in_flight=lambda: len(context.inflight.running()))
        async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
            app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
            stop, port = await start_metrics_server(metrics, audit, "127.0.0.1", 0)
            try:
                with metrics.installed():
                    async with serving(app) as url:
                        yield MetricsRig(Rig(slack, url, tmp_path / "audit.db", host), app.client,
                                         f"http://127.0.0.1:{port}/metrics", context)
            finally:
                await stop()
                for timer in list(context.timers):
                    timer.cancel()
                audit.close()


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_a_verify_and_an_approved_restart_move_the_counters_by_what_the_audit_log_holds(
        metrics_rig: MetricsRig) -> None:
    rig = metrics_rig.rig
    before = await metrics_rig.scrape()
    assert value(before, "proofbot_operations_in_flight") == 0
    assert value(before, "proofbot_lease_takeovers_total") == 0  # present, and 0 until leases land

    assert (await rig.command("/verify", "ct129")).status_code == 200
    await rig.slack.wait_until(lambda: any(m.edits and "verify: FAIL" in m.edits[-1].text
                                           for m in rig.slack.messages_in(CHANNEL) if not m.is_reply),
                               timeout=30, what="the verify's verdict")
    assert (await rig.command("/restart", "ct129")).status_code == 200
    plan = await rig.restore_plan_message()
    response, _ = await rig.click(plan, "restart_approve", APPROVER)
    assert response.status_code == 200
    await rig.slack.wait_until(lambda: "restart: PASS" in rig.slack.message(CHANNEL, plan.ts).text,
                               timeout=60, what="the restart's verdict")
    await rig.slack.wait_until(lambda: metrics_rig.db_rows(
        "SELECT COUNT(*) FROM events WHERE kind = 'finished'")[0][0] >= 2, what="both operations recorded")

    await rig.slack.wait_until(lambda: any(m.text.startswith("Summary of operation")
                                           for m in rig.slack.thread(CHANNEL, plan.ts)), what="the restart's summary")
    await until("the restart's slot given back", lambda: metrics_rig.rig_context.inflight.running() == [])
    after = await metrics_rig.scrape()
    finished = metrics_rig.db_rows("SELECT operation, json_extract(details, '$.verdict'), COUNT(*) FROM events "
                                   "WHERE kind = 'finished' GROUP BY 1, 2")
    assert sorted((str(op), str(verdict)) for op, verdict, _ in finished) == [("restart", "pass"), ("verify", "fail")]
    for operation, verdict, count in finished:
        moved = value(after, "proofbot_operations_total", operation=str(operation), verdict=str(verdict)) - value(
            before, "proofbot_operations_total", operation=str(operation), verdict=str(verdict))
        assert moved == count == 1, (operation, verdict)
    assert value(after, "proofbot_approvals_total", decision="approved") - value(
        before, "proofbot_approvals_total", decision="approved") == 1
    assert value(after, "proofbot_approvals_total", decision="rejected") == 0

    timed = metrics_rig.db_rows("SELECT json_extract(details, '$.name') FROM events WHERE kind = 'check' AND "
                                "json_extract(details, '$.evidence.duration_s') IS NOT NULL")
    families: dict[str, int] = {}
    for (name,) in timed:
        families[str(name).split(":")[0]] = families.get(str(name).split(":")[0], 0) + 1
    assert families.get("file") and families.get("cmdline")
    for family, count in families.items():
        assert value(after, "proofbot_check_duration_seconds_count", check=family) - value(
            before, "proofbot_check_duration_seconds_count", check=family) == count, family

    [(events,)] = metrics_rig.db_rows("SELECT COUNT(*) FROM events")
    assert value(after, "proofbot_audit_chain_events") == events
    assert value(after, "proofbot_ssh_connects_total") > value(before, "proofbot_ssh_connects_total")
    assert value(after, "proofbot_operations_in_flight") == 0
    assert "ct129" not in metrics_rig.text and "host=" not in metrics_rig.text  # no per-host label


async def test_an_unreachable_host_counts_one_failed_connect_by_its_error(metrics_rig: MetricsRig) -> None:
    rig = metrics_rig.rig
    before = await metrics_rig.scrape()
    assert (await rig.command("/verify", "ct130")).status_code == 200
    await rig.slack.wait_until(lambda: any(m.edits and "ct130 verify: COULD NOT CHECK" in m.edits[-1].text
                                           for m in rig.slack.messages_in(CHANNEL) if not m.is_reply),
                               timeout=30, what="the could-not-check verdict")
    after = await metrics_rig.scrape()
    failed = {labels: after[key] - before.get(key, 0.0) for key in after
              for name, labels in [key] if name == "proofbot_ssh_connect_failures_total"}
    assert {dict(labels)["error"]: moved for labels, moved in failed.items() if moved} == {"HostUnreachable": 1}
    assert value(after, "proofbot_ssh_connects_total") - value(before, "proofbot_ssh_connects_total") == 1
    assert value(after, "proofbot_operations_total", operation="verify", verdict="error") - value(
        before, "proofbot_operations_total", operation="verify", verdict="error") == 1


async def test_slack_errors_by_method_and_each_429(metrics_rig: MetricsRig) -> None:
    slack, client = metrics_rig.rig.slack, metrics_rig.app_client
    # the earlier tests' threads may still be posting evidence after their verdicts (their 429s would count here)
    await until("every earlier thread posted", lambda: metrics_rig.rig_context.inflight.running() == [])
    before = await metrics_rig.scrape()
    with pytest.raises(SlackApiError):
        await client.chat_postMessage(channel="C0NOWHERE", text="hello")  # type: ignore[attr-defined]
    slack.set_rate_limit("auth.test", 1, 1.0)
    await client.auth_test()  # type: ignore[attr-defined]
    await client.auth_test()  # type: ignore[attr-defined]  # a 429, then (after Retry-After) taken
    after = await metrics_rig.scrape()
    assert value(after, "proofbot_slack_api_errors_total", method="chat.postMessage",
                 error="channel_not_found") - value(before, "proofbot_slack_api_errors_total",
                                                    method="chat.postMessage", error="channel_not_found") == 1
    refused = [call for call in slack.calls_to("auth.test") if call.http_status == 429]
    assert len(refused) >= 1
    assert value(after, "proofbot_slack_rate_limited_total") - value(before, "proofbot_slack_rate_limited_total") \
        == len(refused)
    assert json.dumps(sorted(k[0] for k in after)).count("auth.test") == 0  # a retried 429 is not an error


async def test_a_slack_that_cannot_be_reached_counts_as_unreachable(metrics_rig: MetricsRig) -> None:
    before = await metrics_rig.scrape()
    nowhere = RedactingWebClient(token="xoxb-test", base_url=f"http://127.0.0.1:{closed_port()}/api/", timeout=5)
    with pytest.raises(aiohttp.ClientError):
        await nowhere.chat_postMessage(channel=CHANNEL, text="hello")
    after = await metrics_rig.scrape()
    key = ("proofbot_slack_api_errors_total", (("error", "unreachable"), ("method", "chat.postMessage")))
    assert after.get(key, 0.0) - before.get(key, 0.0) == 1


async def test_a_metrics_port_in_use_is_refused_with_what_to_do(tmp_path: Path) -> None:
    store = AuditStore.open(tmp_path / "audit.db")
    stop, port = await start_metrics_server(Metrics(), store, "127.0.0.1", 0)
    try:
        with pytest.raises(UsageError) as refused:
            await start_metrics_server(Metrics(), store, "127.0.0.1", port)
    finally:
        await stop()
        store.close()
    assert f"cannot serve metrics on 127.0.0.1:{port}" in refused.value.message
    assert "--metrics-port" in refused.value.hint
