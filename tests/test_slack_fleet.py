"""Tier 1: ``/verify GROUP`` through the real bolt app and the strict fake Slack.

A 24-host group of loopback demo hosts (many inventory names, two demo hosts, one host
black-holed): the parent counts hosts as they finish (at most one edit a second), ends with
the grouped verdict, one reply per group that did not pass with an example's evidence, the
per-host table as a file, and a button that re-verifies exactly the hosts that did not pass.
At 500 hosts (results built as data) every message stays inside Slack's limits and pace.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from bot.demo.host import DemoHost
from bot.slack.app import BotContext, build_app
from bot.slack.fleet import post_outcome
from bot.slack.fleet_blocks import FleetView, fleet_table, fleet_verdict_message, group_reply_message
from bot.slack.redacting import RedactingWebClient
from bot.slack.thread import UPDATE_INTERVAL_S, OperationThread
from bot.slack.verify import verify_request
from commands.errors import ProofbotError, UsageError
from commands.findings import Evidence, Finding
from commands.fleet import group_outcomes
from commands.inventory import parse_inventory
from commands.operation import OperationResult
from commands.store.db import AuditStore
from commands.verify import VerifyPlan
from commands.verify.fleet import FleetRequest, FleetResult
from tests.fleet_rig import fleet_document, fleet_entry, proxied_known_hosts
from tests.lab.proxy import DelayProxy
from tests.slack_fake.blockkit import validate_blocks
from tests.slack_fake.records import Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.test_slack_restore import CHANNEL, REQUESTER, Rig
from tests.test_slack_text_fuzz import INVENTORY as FUZZ_INVENTORY
from tests.test_slack_text_fuzz import TEXT

SECRET = "fleet-secret"
SEEDED = [f"ct{n}" for n in range(101, 113)]  # the seed's broken state: patched file, extra file, bad flag
CLEAN = [f"ct{n}" for n in range(113, 124)]
BLACK_HOLED = "ct124"


def strict_limits(slack: FakeSlack) -> None:
    """Slack's documented pace (the fake's own): about one message a second a channel with short bursts,
    chat.update Tier 3 (50 a minute); the outbox keeps inside it, so nothing is ever refused for pace."""
    slack.rate_limits.enabled = True


def refused_for_pace(slack: FakeSlack) -> list[str]:
    return [call.method for call in slack.calls if call.http_status == 429]


@pytest_asyncio.fixture(loop_scope="session")
async def fleet_rig(seeded_host: DemoHost, clean_host: DemoHost, tmp_path: Path) -> AsyncIterator[
        tuple[Rig, DelayProxy]]:
    async with DelayProxy("127.0.0.1", clean_host.ssh_port) as proxy:
        known = proxied_known_hosts(clean_host, proxy.port, tmp_path / "known_hosts")
        hosts = {**{name: fleet_entry(seeded_host) for name in SEEDED},
                 **{name: fleet_entry(clean_host) for name in CLEAN},
                 BLACK_HOLED: fleet_entry(clean_host, proxy.port, known)}
        inventory = parse_inventory(fleet_document(hosts, clean_host, max_parallel=6, host_deadline_s=8), "inv.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
            strict_limits(slack)
            app = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, signing_secret=SECRET,
                            api_url=slack.api_url)
            try:
                async with serving(app) as url:
                    yield Rig(slack, url, tmp_path / "audit.db", seeded_host), proxy
            finally:
                audit.close()


def parents(slack: FakeSlack) -> list[Message]:
    return [m for m in slack.messages_in(CHANNEL) if not m.is_reply]


def is_done(message: Message) -> bool:
    return message.text.startswith("verify ")  # progress reads "7/24 hosts · …"


async def test_verify_group_reads_at_a_glance_and_reverifies_only_the_failed(
        fleet_rig: tuple[Rig, DelayProxy]) -> None:
    rig, proxy = fleet_rig
    proxy.blackhole()
    ack = await rig.command("/verify", "gpu-west")
    assert ack.status_code == 200
    await rig.slack.wait_until(lambda: len(parents(rig.slack)) == 1, what="the parent")
    [parent] = parents(rig.slack)
    assert parent.text.startswith("0/24 hosts · verifying gpu-west")
    await rig.slack.wait_until(lambda: is_done(rig.slack.message(CHANNEL, parent.ts)), timeout=120,
                               what="the fleet verdict")
    parent = rig.slack.message(CHANNEL, parent.ts)
    assert parent.text == "verify gpu-west: FAIL — 24 hosts · 11 ✓ · 12 ✗ · 1 could not check"
    progress = [edit.text for edit in parent.edits[:-1]]
    assert any(text.startswith(("1", "2", "3", "4", "5", "6", "7", "8", "9")) and "/24 hosts" in text
               for text in progress), progress
    gaps = [b - a for a, b in itertools.pairwise(parent.update_times[:-1])]  # the verdict goes when it is known
    assert all(gap >= UPDATE_INTERVAL_S - 0.05 for gap in gaps), gaps  # progress: at most one edit in 2 s
    shown = json.dumps(parent.blocks)
    assert "`ct[101-112]`" in shown and "`ct[113-123]`" in shown and "`ct124`" in shown
    assert "no SSH answer within 5 s" in shown
    [button] = [e for b in parent.blocks or [] if b["type"] == "actions" for e in b["elements"]]
    assert button["text"]["text"] == "Re-verify the 13 that failed"

    await rig.slack.wait_until(lambda: any(f.completed for f in rig.slack.files.values()), timeout=30,
                               what="the per-host table")
    replies = rig.slack.thread(CHANNEL, parent.ts)
    assert [r.text for r in replies] == ["Group 1 of 2: FAIL on 12 hosts", "Group 2 of 2: COULD NOT CHECK on 1 host"]
    failing = json.dumps(replies[0].blocks)
    assert "evidence below is *ct101*'s" in failing and "ct102 `op-" in failing
    assert "$ " in failing and "--enable-ddtree" in failing  # the example's commands and output, as a check reply
    assert "no SSH answer within 5 s" in json.dumps(replies[1].blocks)
    [table] = [f for f in rig.slack.files.values() if f.completed]
    assert table.thread_ts == parent.ts
    rows = (table.content or b"").decode().splitlines()
    assert sum(1 for row in rows if row.startswith("ct1")) == 24
    assert any(row.startswith("ct124") and "COULD NOT CHECK" in row for row in rows)
    assert refused_for_pace(rig.slack) == []

    first = fleet_operation(rig, parent.ts)
    proxy.restore()  # the black-holed host is reachable again: re-verified, it passes
    clicked, _ = await rig.click(parent, "fleet_reverify", REQUESTER)
    assert clicked.status_code == 200
    await rig.slack.wait_until(lambda: len(parents(rig.slack)) == 2, what="a new parent")
    again = parents(rig.slack)[1]
    await rig.slack.wait_until(lambda: is_done(rig.slack.message(CHANNEL, again.ts)), timeout=120,
                               what="the re-verify's verdict")
    again = rig.slack.message(CHANNEL, again.ts)
    assert again.text == (f"verify the 13 not passing in {first['operation_id']}: FAIL — "
                          "13 hosts · 1 ✓ · 12 ✗")
    rerun = fleet_operation(rig, again.ts)
    assert rerun["hosts"] == [*SEEDED, BLACK_HOLED]  # exactly those that did not pass, nothing from the click
    assert rerun["hosts"] != first["hosts"] and len(first["hosts"]) == 24
    assert refused_for_pace(rig.slack) == []

    host_verify = _host_operation(rig, "ct101")
    forged = [{"type": "actions", "elements": [{"action_id": "fleet_reverify", "value": host_verify}]}]
    refused, url = await rig.click(again, "fleet_reverify", REQUESTER, shown=forged)
    assert refused.status_code == 200
    await rig.slack.wait_until(lambda: bool(rig.slack.responses_to(url)), what="the refusal")
    assert "is not a fleet verify" in rig.slack.responses_to(url)[0].body["text"]
    assert len(parents(rig.slack)) == 2  # nothing ran


def _host_operation(rig: Rig, host: str) -> str:
    return str(sqlite3.connect(rig.db).execute(
        "SELECT operation_id FROM events WHERE kind = 'requested' AND host = ? LIMIT 1", (host,)).fetchone()[0])


def fleet_operation(rig: Rig, thread_ts: str) -> dict[str, Any]:
    """The fleet operation whose thread is ``thread_ts``, as the audit log has it."""
    rows = sqlite3.connect(rig.db).execute(
        "SELECT operation_id, details FROM events WHERE kind = 'requested' AND host IS NULL").fetchall()
    for operation_id, details in rows:
        request = json.loads(details)
        if request["origin"]["thread_ts"] == thread_ts:
            return {**request["fleet"], "operation_id": operation_id}
    raise AssertionError(f"no fleet operation for thread {thread_ts}")


def _result(host: str, index: int, checks: list[Finding]) -> OperationResult:
    return OperationResult(f"op-20260101T000000-{index:06x}", "verify", host, "2026-01-01T00:00:00.000Z", 1.5,
                           checks)


def _fleet_of_500() -> FleetResult:
    """500 hosts with long names, interleaved: 370 pass, 30 warn, 40 fail alike, 15 could not check,
    30 fail each their own way (so more groups than the thread takes), 15 fail with the same long output."""
    evidence = Evidence("sha256sum -- /srv/a /srv/b", 0, "x" * 3900, 0.01)
    ok = [Finding("main-pid", "pass", "PID 4242 running", evidence), Finding("health", "pass", "200 OK", evidence)]
    kinds = (["pass"] * 370 + ["warn"] * 30 + ["fail-a"] * 40 + ["error"] * 15 + [f"own-{i}" for i in range(30)]
             + ["fail-b"] * 15)
    rng = random.Random(7)
    rng.shuffle(kinds)
    results = []
    for index, kind in enumerate(kinds):
        host = f"i-{rng.getrandbits(64):016x}"  # cloud instance ids: nothing folds into ranges
        extra = {"pass": [],
                 "warn": [Finding("stale-process", "warn", f"PID {index} started before spec_info.py changed",
                                  evidence)],
                 "fail-a": [Finding("file:spec_info.py", "fail", "differs from backup pre-ddtree", evidence)],
                 "error": [Finding("health", "error", f"timed out after 120 s on {host}", None)],
                 "fail-b": [Finding(f"file:f{n}.py", "fail", "x" * 400, evidence) for n in range(20)],
                 }.get(kind, [Finding("cmdline", "fail", f"missing --flag-{kind}", evidence)])
        results.append(_result(host, index, [*ok, *extra]))
    return FleetResult("op-20260101T000000-f1ee70", "verify", "all", "2026-01-01T00:00:00.000Z", 61.2, results)


def test_500_hosts_render_inside_slacks_limits() -> None:
    fleet = _fleet_of_500()
    groups = group_outcomes(fleet.results)
    view = FleetView(REQUESTER, {result.host: "no backup pre-ddtree"
                                 for result in fleet.results[1:400:7]}, {})
    text, blocks = fleet_verdict_message(fleet, groups, view)
    assert validate_blocks(blocks) == [] and len(blocks) <= 50
    assert text == "verify all: FAIL — 500 hosts · 370 ✓ · 30 ⚠ · 85 ✗ · 15 could not check"
    shown = json.dumps(blocks, ensure_ascii=False)
    # 34 groups did not pass (32 fail, 1 could not check, 1 warn): 20 on the parent, failures first
    assert "… and 14 more groups (57 hosts): see the attached table" in shown
    passed = next(b["text"]["text"] for b in blocks if b["text"]["text"].startswith(":white_check_mark: *370 passed*"))
    assert passed.endswith(" more") and " … and " in passed and len(passed) <= 3000
    assert "files not compared on 57 hosts (no backup pre-ddtree)" in shown
    assert "Re-verify the 100 that failed" in shown
    failing = [g for g in groups if g.outcome != "pass"]
    by_host = {r.host: r for r in fleet.results}
    for index, group in enumerate(failing, start=1):
        _, reply = group_reply_message(group, index, len(failing), by_host, True)
        assert validate_blocks(reply) == [] and len(reply) <= 50, index
    rows = [row for row in fleet_table(fleet).splitlines() if row.startswith("i-")]
    assert len(rows) == 500 and sum("COULD NOT CHECK" in row for row in rows) == 15


async def test_500_hosts_post_at_slacks_pace(tmp_path: Path) -> None:
    """The end of a 500-host verify as Slack sees it: the final parent, ten group replies and a note,
    the table as a file, in that order, at Slack's pace: nothing refused."""
    fleet = _fleet_of_500()
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        strict_limits(slack)
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)
        thread = await OperationThread.open(client, CHANNEL, ("0/500 hosts", []))
        await post_outcome(thread, fleet, FleetView(REQUESTER, {}, {}))
        message = slack.message(CHANNEL, thread.ts)
        assert message.text.startswith("verify all: FAIL — 500 hosts")
        replies = slack.thread(CHANNEL, message.ts)
        assert len(replies) == 11 and replies[-1].text.startswith("… 24 more groups (67 hosts) did not pass")
        assert [r.text.split(" of ")[0] for r in replies[:10]] == [f"Group {n}" for n in range(1, 11)]
        assert message.edits[-1].at <= replies[0].posted_at, "a group reply before the verdict it explains"
        [table] = slack.files.values()
        assert table.completed and table.thread_ts == message.ts
        assert sum(row.startswith("i-") for row in (table.content or b"").decode().splitlines()) == 500
        assert refused_for_pace(slack) == []


async def test_progress_coalesces_newest_wins() -> None:
    async with FakeSlack(channels={CHANNEL: "ops"}) as slack:
        strict_limits(slack)
        client = RedactingWebClient(token=slack.bot_token, base_url=slack.api_url)
        thread = await OperationThread.open(client, CHANNEL, ("0/500 hosts", []))
        for done in range(1, 501):
            thread.update((f"{done}/500 hosts", []))
            await asyncio.sleep(0.005)
        await slack.wait_until(lambda: slack.message(CHANNEL, thread.ts).text == "500/500 hosts",
                               timeout=10, what="the newest progress on the parent")
        await thread.finish(("verify all: PASS", []))
        message = slack.message(CHANNEL, thread.ts)
        times = message.update_times  # coalesced: not one edit per host, at most one in UPDATE_INTERVAL_S
        assert 1 < len(message.edits) < 10 and message.text == "verify all: PASS"
        assert all(b - a >= UPDATE_INTERVAL_S - 0.05 for a, b in itertools.pairwise(times[:-1]))
        assert refused_for_pace(slack) == []


def test_slash_text_is_one_host_or_a_fleet(clean_host: DemoHost) -> None:
    names = {name: fleet_entry(clean_host) for name in ("ct101", "ct102", "ct103")}
    document = yaml.safe_load(fleet_document(names, clean_host))
    document["hosts"]["ct103"]["backups"] = {}  # a host without the backup: verified, its files not compared
    inventory = parse_inventory(yaml.safe_dump(document), "inv.yml")
    one = verify_request(inventory, {"text": "ct101 pre-ddtree"})
    assert isinstance(one, VerifyPlan) and one.backup_name == "pre-ddtree"
    fleet = verify_request(inventory, {"text": "gpu-west pre-ddtree"})
    assert isinstance(fleet, FleetRequest) and fleet.target == "gpu-west"
    assert [p.backup_name for p in fleet.plan.plans] == ["pre-ddtree", "pre-ddtree", None]
    assert fleet.plan.without_backup == {"ct103": "no backup pre-ddtree"}
    two = verify_request(inventory, {"text": "ct102 ct101"})
    assert isinstance(two, FleetRequest) and [p.host.name for p in two.plan.plans] == ["ct102", "ct101"]
    for text, words in (("gpu-west pre-ddtre", "no host here has a backup 'pre-ddtre'"),
                        ("ct101 ct1O2 pre-ddtree", "unknown host or group 'ct1O2'")):
        with pytest.raises(UsageError) as refused:
            verify_request(inventory, {"text": text})
        assert words in refused.value.message


def fleet_expansion(text: str) -> tuple[list[str], str | None] | None:
    """The contract of ``/verify HOST|GROUP... [BACKUP]`` (None: to be refused): the hosts named or in the
    groups named, in order, each once, and the backup (a last word that is no host or group) some of them
    have; one host alone follows ``/verify HOST [BACKUP]``."""
    words = text.split()
    known = FUZZ_INVENTORY.hosts.keys() | FUZZ_INVENTORY.groups.keys()
    targets, backup = (words[:-1], words[-1]) if len(words) > 1 and words[-1] not in known else (words, None)
    if not targets or any(word not in known for word in targets):
        return None
    if len(targets) == 1 and targets[0] in FUZZ_INVENTORY.hosts:
        backups = FUZZ_INVENTORY.hosts[targets[0]].backups
        ok = backup in backups if backup is not None else len(backups) <= 1
        return (targets, backup) if ok else None
    hosts = list(dict.fromkeys(name for word in targets for name in (
        FUZZ_INVENTORY.groups[word] if word in FUZZ_INVENTORY.groups else (word,))))
    if backup is not None and not any(backup in FUZZ_INVENTORY.hosts[name].backups for name in hosts):
        return None
    return hosts, backup


NAMES = sorted(FUZZ_INVENTORY.hosts.keys() | FUZZ_INVENTORY.groups.keys())
BACKUPS = sorted({name for host in FUZZ_INVENTORY.hosts.values() for name in host.backups})


@st.composite
def valid_fleet_text(draw: st.DrawFn) -> str:
    targets = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4))
    words = [*targets, *draw(st.lists(st.sampled_from(BACKUPS), max_size=1))]
    text = draw(st.text(" \t", max_size=2)) + draw(st.text(" \t\n", min_size=1, max_size=2)).join(words)
    assume(fleet_expansion(text) is not None)  # one host and a backup it lacks, or several without it
    return text


@settings(max_examples=300, deadline=None)
@given(valid_fleet_text())
def test_every_valid_fleet_text_is_accepted_with_its_hosts_in_order(text: str) -> None:
    expansion = fleet_expansion(text)
    assert expansion is not None
    hosts, backup = expansion
    request = verify_request(FUZZ_INVENTORY, {"text": text})
    if isinstance(request, VerifyPlan):
        assert [request.host.name] == hosts and request.backup_name == backup
        return
    assert [plan.host.name for plan in request.plan.plans] == hosts
    assert all(plan.backup_name == (backup if backup in plan.host.backups else None) for plan in request.plan.plans)


@settings(max_examples=400, deadline=None)
@given(TEXT)
@example("ct129 ct130 pre-ddtree")
@example("all other")
def test_fleet_text_names_only_inventory_hosts_and_backups(text: str) -> None:
    """Whatever is typed, a fleet is made of inventory hosts (each once) and a backup some of them have."""
    try:
        request = verify_request(FUZZ_INVENTORY, {"text": text})
    except ProofbotError:
        assert fleet_expansion(text) is None, f"a valid text was refused: {text!r}"
        return
    assert fleet_expansion(text) is not None, f"an invalid text was accepted: {text!r}"
    if isinstance(request, VerifyPlan):
        assert request.host is FUZZ_INVENTORY.hosts[request.host.name]
        return
    hosts = [plan.host for plan in request.plan.plans]
    assert all(host is FUZZ_INVENTORY.hosts[host.name] for host in hosts) and len(set(map(id, hosts))) == len(hosts)
    for plan in request.plan.plans:
        assert plan.backup_name is None or plan.backup_name in plan.host.backups
    assert set(request.target.split()) <= FUZZ_INVENTORY.hosts.keys() | FUZZ_INVENTORY.groups.keys()
