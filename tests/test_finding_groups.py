"""Tier 1: the runner hands on the findings known together as one group (a verify logs each group in one audit
transaction), and never holds a finding back for an HTTP answer that has not come yet (real sshd on loopback,
a real HTTP server the host reaches over a direct-tcpip channel)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.demo.host import DemoHost
from commands.checks.check import HttpCheck, HttpRequest, Read
from commands.checks.health import HttpOutcome, health_finding
from commands.errors import CouldNotCheck
from commands.findings import Evidence, Finding
from commands.operation import Origin
from commands.ssh import connect
from commands.store.chain import verify_chain
from commands.store.db import WRITES, AuditStore, WriteTally
from commands.store.log import audit_log
from commands.verify import VerifyPlan, verify
from commands.verify.runner import finding_groups
from commands.vocabulary import CheckStatus, EventKind, Operation
from tests.test_check_runner import Echo
from tests.test_ssh import host_of


@dataclass(frozen=True)
class Answered(HttpCheck):
    """An HTTP check answered before anything is sent (as a probe that must not be sent is)."""

    label: str

    @property
    def name(self) -> str:
        return self.label

    def request(self) -> HttpRequest | Finding:
        return Finding(self.label, CheckStatus.PASS, "known", Evidence.of("none", 0, "", 0.0))

    def parse(self, outcome: HttpOutcome) -> Finding:
        raise AssertionError("nothing was sent")


@dataclass(frozen=True)
class Slow(HttpCheck):
    """A GET of a server that answers only when the test lets it."""

    url: str

    @property
    def name(self) -> str:
        return "slow"

    def request(self) -> HttpRequest | Finding:
        return HttpRequest(self.url, 30.0)

    def parse(self, outcome: HttpOutcome) -> Finding:
        return health_finding(outcome)


@dataclass(frozen=True)
class Broken(Echo):
    """A check whose parser cannot judge what came back."""

    def parse(self, read: Read) -> Finding:
        raise CouldNotCheck("unreadable on purpose")


@pytest.fixture
async def gated_server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """An HTTP server on loopback that answers 200 once the event is set."""
    gate = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            await gate.wait()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK")
            await writer.drain()
        finally:  # closed whatever happened (a client gone, the loop ending): never left for the GC to find
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/health", gate
        gate.set()


async def test_findings_known_together_come_as_one_group(clean_host: DemoHost) -> None:
    checks = [Echo("one", ("a",)), Answered("early"), Echo("two", ("b", "c")), Answered("late")]
    async with connect(host_of(clean_host)) as conn:
        groups = [([finding.name for finding in group], group.last) async for group in finding_groups(conn, checks)]
    assert groups == [(["one", "early", "two", "late"], True)]


async def test_a_group_ends_where_an_answer_has_not_come_yet(clean_host: DemoHost,
                                                             gated_server: tuple[str, asyncio.Event]) -> None:
    """The findings before the pending HTTP check are handed on while it is still unanswered: nothing that
    could be shown waits for it."""
    url, gate = gated_server
    checks = [Echo("one", ("a",)), Echo("two", ("b",)), Slow(url), Echo("three", ("c",))]
    async with connect(host_of(clean_host)) as conn:
        groups = finding_groups(conn, checks)
        # the server answers only after this: a runner that waited for it would time out here
        first = await asyncio.wait_for(anext(groups), 30)
        assert [finding.name for finding in first] == ["one", "two"] and not first.last  # more are to come
        gate.set()
        rest = [([(finding.name, finding.status) for finding in group], group.last) async for group in groups]
    assert rest == [([("health", CheckStatus.PASS), ("three", CheckStatus.PASS)], True)]


async def test_a_check_that_cannot_be_judged_still_lets_the_findings_before_it_through(clean_host: DemoHost) -> None:
    checks = [Echo("one", ("a",)), Broken("broken", ("b",)), Echo("two", ("c",))]
    seen: list[list[str]] = []
    async with connect(host_of(clean_host)) as conn:
        with pytest.raises(CouldNotCheck, match="unreadable on purpose"):
            async for group in finding_groups(conn, checks):
                seen.append([finding.name for finding in group])
    assert seen == [["one"]]


async def test_a_verify_logs_its_findings_as_one_by_one_and_the_chain_holds(clean_host: DemoHost,
                                                                           store_target: Path | str) -> None:
    """A verify's check events, written a group at a time, are the very events written one by one (same kinds,
    order and details), one chain that `audit verify` passes, on both backends; its last group is committed with
    its `finished` (one transaction fewer a host)."""
    store = AuditStore.open(store_target)
    tally = WriteTally()
    WRITES.set(tally)
    writes_when_shown: list[int] = []  # the transactions committed by the time each finding is shown

    async def shown(_finding: Finding) -> None:
        writes_when_shown.append(tally.writes)
    try:
        result = await verify(VerifyPlan.for_host(host_of(clean_host), None), origin=Origin.local_user(),
                              audit=store, on_finding=shown)
        writes = tally.writes
        written = await store.events_of(result.operation_id)
        log = audit_log(store, Operation.VERIFY, "one-by-one", result.host, Origin.local_user().actor)
        for finding in result.checks:
            await log.check(finding)
        by_one = await store.events_of("one-by-one")
        report = await verify_chain(store)
    finally:
        store.close()
    assert [event.kind for event in written] == [EventKind.REQUESTED, *[EventKind.CHECK] * 8, EventKind.FINISHED]
    assert [event.details for event in written[1:-1]] == [event.details for event in by_one]
    assert [event.id for event in written] == list(range(1, 11))
    assert report.intact and report.events == 18
    # the last findings were committed with the verify's ending: nothing is written after they are shown
    assert len(writes_when_shown) == 8 and writes == writes_when_shown[-1]
