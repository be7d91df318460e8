"""The watch's test rig: a simulated clock (a week passes without sleeping), an inventory of many loopback
hosts, and the announcements a watch posts, recorded."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.demo.host import DemoHost
from bot.slack.watch import slack_poster
from commands.findings import Evidence, Finding
from commands.inventory import Inventory, parse_inventory
from commands.inventory.watch import WatchEntry
from commands.operation import OperationResult, Origin, new_operation_id
from commands.store.db import AuditStore
from commands.verify.fleet import FleetResult
from commands.vocabulary import CheckStatus, Operation
from commands.watch.audit import WatchAudit
from commands.watch.fleet import fleet_verifier
from commands.watch.holds import LockHolds
from commands.watch.schedule import Post, TargetRun, VerifyTarget, Watch
from commands.watch.state import Announcement
from tests.fleet_rig import fleet_entry
from tests.slack_fake.server import FakeSlack


class SimulatedClock:
    """Time that moves only when the watch waits: ``sleep_until`` jumps to the moment at once."""

    def __init__(self, start: datetime) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    async def sleep_until(self, moment: datetime) -> None:
        self.current = max(self.current, moment)
        await asyncio.sleep(0)


class Posted:
    """What the watch posted, in order: each announcement with the entry's channel."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Announcement]] = []
        self.slack: list[tuple[str, list[str]]] = []  # as the fake Slack holds them: each parent's text, its replies'
        self.fleets: list[FleetResult] = []  # the run each message was made of

    async def __call__(self, entry: WatchEntry, announcement: Announcement, fleet: FleetResult) -> None:
        self.messages.append((entry.channel, announcement))
        self.fleets.append(fleet)

    def hosts(self) -> list[list[tuple[str, str]]]:
        """Each message as its (host, change) pairs, hosts sorted."""
        return [sorted((change.host, str(change.change)) for change in message.changes)
                for _, message in self.messages]


def watch_inventory(tmp_path: Path, groups: dict[str, list[tuple[str, DemoHost]]], watch: list[dict[str, Any]],
                    ssh: Mapping[str, Any] | None = None, fleet: Mapping[str, Any] | None = None) -> Inventory:
    """An inventory whose groups name hosts, each reached on its loopback lab host (many names, one host);
    ``ssh``, ``fleet``: settings added to the inventory's ``ssh:`` and ``fleet:`` sections."""
    template = next(iter(groups.values()))[0][1]
    document = template.inventory()
    document["ssh"] = {**document.get("ssh", {}), **(ssh or {})}
    if fleet:
        document["fleet"] = {**document.get("fleet", {}), **fleet}
    document["hosts"] = {name: fleet_entry(host) for members in groups.values() for name, host in members}
    document["groups"] = {group: [name for name, _ in members] for group, members in groups.items()}
    document["watch"] = watch
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return parse_inventory(path.read_text(), str(path))


def recorded_result(host: str, failing: bool) -> OperationResult:
    """A host's verify as it comes back (one file check, passing or failing), without SSH."""
    status = CheckStatus.FAIL if failing else CheckStatus.PASS
    finding = Finding("file:spec_info.py", status, "differs" if failing else "same",
                      Evidence.of("sha256sum /x", 0, "abc  /x", 0.01))
    return OperationResult(new_operation_id(), Operation.VERIFY, host, "", 0.1, [finding])


class RecordedFleet:
    """A watch's ``verify_target`` without SSH: the entry's run by run, ``failing(run index)`` names the hosts
    failing. ``hosts``: every entry's, or each target's."""

    def __init__(self, hosts: Sequence[str] | Mapping[str, Sequence[str]], failing: Callable[[int], set[str]]) -> None:
        self.hosts, self.failing, self.runs = hosts, failing, Counter[str]()
        self.made: dict[tuple[str, bool], OperationResult] = {}  # each host's two results, made once

    async def __call__(self, entry: WatchEntry) -> FleetResult:
        broken = self.failing(self.runs[entry.target])
        self.runs[entry.target] += 1
        hosts = self.hosts[entry.target] if isinstance(self.hosts, Mapping) else self.hosts
        results = []
        for host in hosts:
            made = self.made.setdefault((host, host in broken), recorded_result(host, host in broken))
            results.append(dataclasses.replace(made, operation_id=new_operation_id()))
        return FleetResult(new_operation_id(), Operation.VERIFY, entry.target, "", 0.1, results)


async def watch_into_slack(inventory: Inventory, tmp_path: Path, start: datetime, runs: int,
                           between: Callable[[int], object], verify_target: VerifyTarget | None = None,
                           ) -> tuple[Posted, list[TargetRun]]:
    """``runs`` runs of the inventory's watch from ``start``, posting to a fake Slack; ``between(n)`` after the
    n-th (0-based). What was posted is returned as the fake Slack holds it: each parent and its replies.
    ``verify_target``: the real fleet verify over SSH unless given (``RecordedFleet``)."""
    audit = AuditStore.open(tmp_path / "audit.db")
    posted, done = Posted(), list[TargetRun]()
    async with FakeSlack(channels={"C0WATCH": "watch"}) as slack:
        to_slack = slack_poster(AsyncWebClient(token=slack.bot_token, base_url=slack.api_url))

        async def post(entry: WatchEntry, announcement: Announcement, fleet: FleetResult) -> None:
            await posted(entry, announcement, fleet)
            await to_slack(entry, announcement, fleet)

        await _run_watch(inventory, audit, start, runs, between, post, done, verify_target)
        posted.slack = [(message.text, [reply.text for reply in slack.thread("C0WATCH", message.ts)])
                        for message in slack.messages_in("C0WATCH") if not message.is_reply]
    return posted, done


async def _run_watch(inventory: Inventory, audit: AuditStore, start: datetime, runs: int,
                     between: Callable[[int], object], post: Post, done: list[TargetRun],
                     verify_target: VerifyTarget | None) -> None:
    origin = Origin("proofbot:watch", "slack")
    recorded = WatchAudit(audit, inventory, origin)

    async def on_run(run: TargetRun) -> None:
        await recorded.record(run)
        done.append(run)
        outcome = between(len(done) - 1)
        if inspect.isawaitable(outcome):
            await outcome

    watch = Watch(inventory.watch, verify_target or fleet_verifier(inventory, None, origin), post,
                  clock=SimulatedClock(start), held_until=LockHolds(inventory, audit), on_run=on_run)
    try:
        await watch.run_forever(until=start + runs * inventory.watch[0].interval)
    finally:
        audit.close()
    assert len(done) == runs
