"""`proofbot audit stream`: a real loopback webhook that is down, then fails, then loses an acknowledgement,
and a loopback RFC 5424 syslog receiver (octet counting); each receiver keeps what it got, drops repeats by
seq and checks the chain itself with its own hashing code (hashlib and json here, never proofbot's)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from commands.errors import UsageError
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.stream import cursor as cursor_module
from commands.stream.cursor import Cursor, StreamState
from commands.stream.run import CursorMismatch, Settings, Undelivered, stream
from commands.stream.targets import HttpTarget, SyslogTarget, syslog_frame
from commands.vocabulary import Operation, Verdict
from tests.lab.waits import until

GENESIS = "0" * 64
TOKEN = "f3a1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b"  # a Splunk HEC token's shape
QUICK = Settings(once=True, batch_events=7, give_up_s=20)


def recomputed(event: dict[str, Any]) -> str:
    """The recipe of docs/observability.md, written out independently of proofbot's code."""
    hashed = {key: value for key, value in event.items() if key not in ("seq", "hash")}
    canonical = json.dumps(hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class Received:
    """What a receiver keeps: each seq once (a repeat must be byte-for-byte the same event), checked as it comes."""

    kept: dict[int, dict[str, Any]] = field(default_factory=dict)
    repeats: int = 0

    def take(self, event: dict[str, Any]) -> None:
        seq = int(event["seq"])
        if seq in self.kept:
            assert self.kept[seq] == event, "a repeat carries the same seq, hash and content"
            self.repeats += 1
            return
        assert recomputed(event) == event["hash"], f"seq {seq} does not hash to its hash"
        self.kept[seq] = event

    def chain(self) -> list[dict[str, Any]]:
        events = [self.kept[seq] for seq in sorted(self.kept)]
        previous = GENESIS
        for event in events:
            assert event["prev_hash"] == previous, f"a gap before seq {event['seq']}"
            previous = event["hash"]
        return events


@dataclass
class Webhook:
    """A loopback SIEM webhook: ``fail`` answers 503 to that many POSTs; ``lose_ack`` keeps that many batches
    and answers 500 anyway (the acknowledgement lost on the way)."""

    received: Received = field(default_factory=Received)
    fail: int = 0
    lose_ack: int = 0
    posts: int = 0
    authorization: str | None = None  # what the Authorization header must be (401 otherwise)

    async def handle(self, request: web.Request) -> web.Response:
        self.posts += 1
        assert request.headers["Content-Type"] == "application/json"
        if request.headers.get("Authorization") != self.authorization:
            return web.Response(status=401)
        if self.fail:
            self.fail -= 1
            return web.Response(status=503)
        for event in (await request.json())["events"]:
            self.received.take(event)
        if self.lose_ack:
            self.lose_ack -= 1
            return web.Response(status=500)
        return web.Response(status=204)


@pytest_asyncio.fixture(loop_scope="session")
async def webhook() -> AsyncIterator[tuple[Webhook, str]]:
    hook = Webhook()
    app = web.Application()
    app.router.add_post("/siem", hook.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield hook, f"http://127.0.0.1:{port}/siem"
    finally:
        await runner.cleanup()


async def record_operations(store: AuditStore, count: int, first: int = 0) -> None:
    for n in range(first, first + count):
        log = audit_log(store, Operation.VERIFY, f"op-{n}", "ct129", "slack:U0ALICE")
        await log.requested(Origin.local_user(), checks=["health"], note="é ✓ ümlaut")  # UTF-8 in the hash
        await log.finished(Finished(Verdict.PASS if n % 3 else Verdict.FAIL, duration_s=0.125 * n))


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest_asyncio.fixture(loop_scope="session")
async def store(tmp_path: Path) -> AsyncIterator[AuditStore]:
    opened = AuditStore.open(tmp_path / "audit.db")
    await record_operations(opened, 20)
    try:
        yield opened
    finally:
        opened.close()


async def test_webhook_resumes_from_the_acknowledged_seq_with_no_gap_and_droppable_repeats(
        store: AuditStore, webhook: tuple[Webhook, str], tmp_path: Path) -> None:
    hook, url = webhook
    state_path = tmp_path / "stream.json"
    down = HttpTarget(f"http://127.0.0.1:{closed_port()}/siem")
    try:
        with pytest.raises(Undelivered) as undelivered:  # the receiver is down: the cursor does not move
            await stream(store, [down], StreamState(state_path), Settings(once=True, batch_events=7, give_up_s=1))
    finally:
        await down.close()
    assert undelivered.value.exit_code == 3 and "ConnectError" in undelivered.value.message
    assert not state_path.exists()

    hook.fail, hook.lose_ack = 2, 1  # back, but failing a while, then one acknowledgement lost
    target = HttpTarget(url)
    try:
        state = StreamState(state_path)
        sent = await stream(store, [target], state, QUICK)
        events = hook.received.chain()
        assert len(events) == 40 and [e["seq"] for e in events] == list(range(1, 41))
        assert hook.received.repeats == 7  # the batch whose acknowledgement was lost came again, the same
        assert sent == {url: 40}  # acknowledged: the repeated batch counts once
        assert StreamState(state_path).cursor(url) == Cursor(40, events[-1]["hash"])
        assert events[0]["details"]["note"] == "é ✓ ümlaut" and events[0]["kind"] == "requested"

        await record_operations(store, 3, first=20)  # more happens; the next run starts after seq 40
        posts = hook.posts
        assert await stream(store, [target], StreamState(state_path), QUICK) == {url: 6}
        assert hook.posts == posts + 1 and len(hook.received.chain()) == 46
    finally:
        await target.close()


async def test_a_cursor_the_log_does_not_hold_is_refused(store: AuditStore, tmp_path: Path) -> None:
    state = StreamState(tmp_path / "stream.json")
    state.acknowledged("http://127.0.0.1:9/siem", Cursor(5, "ab" * 32))  # not event 5's hash
    target = HttpTarget("http://127.0.0.1:9/siem")
    try:
        with pytest.raises(CursorMismatch) as refused:
            await stream(store, [target], StreamState(tmp_path / "stream.json"), QUICK)
    finally:
        await target.close()
    assert refused.value.exit_code == 3 and "seq 5" in refused.value.message


def test_the_state_is_replaced_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "stream.json"
    StreamState(path).acknowledged("a", Cursor(3, "h3"))
    before = path.read_bytes()

    def crash(fd: int) -> None:
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(cursor_module.os, "fsync", crash)
    with pytest.raises(OSError):
        StreamState(path).acknowledged("a", Cursor(9, "h9"))
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["stream.json"]  # no half file, no temp left
    monkeypatch.undo()
    path.write_text('{"version": 1, "targets": {"a": {"seq": "x"}}}')
    with pytest.raises(UsageError, match="is not a proofbot stream state"):
        StreamState(path)


def test_only_http_urls_and_host_port_are_taken() -> None:
    with pytest.raises(UsageError, match="not an http"):
        HttpTarget("ftp://user:hunter2@siem.example/x")
    with pytest.raises(UsageError, match="not HOST:PORT"):
        SyslogTarget("siem.example")


# RFC 5424: <PRI>VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID SP SD SP MSG (BOM + UTF-8)
RFC5424 = re.compile(rb'^<(\d{1,3})>1 (\S+) (\S+) (\S+) (\S+) (\S+) \[proofbot@32473 seq="(\d+)" '
                     rb'hash="([0-9a-f]{64})" prev_hash="([0-9a-f]{64})"\] \xef\xbb\xbf(.*)$', re.S)


@dataclass
class SyslogReceiver:
    received: Received = field(default_factory=Received)
    frames: list[re.Match[bytes]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                length = await reader.readuntil(b" ")  # RFC 6587 octet counting: MSG-LEN SP SYSLOG-MSG
                message = await reader.readexactly(int(length[:-1]))
                match = RFC5424.match(message)
                assert match, message[:200]
                self.frames.append(match)
                event = json.loads(match.group(10).decode("utf-8"))
                assert int(match.group(7)) == event["seq"] and match.group(8).decode() == event["hash"]
                assert match.group(6).decode() == event["kind"] and match.group(2).decode() == event["at"]
                self.received.take(event)
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()


async def test_syslog_rfc5424_over_tcp_after_the_receiver_was_down(store: AuditStore, tmp_path: Path) -> None:
    port = closed_port()
    state_path = tmp_path / "stream.json"
    target = SyslogTarget(f"127.0.0.1:{port}")
    try:
        with pytest.raises(Undelivered):
            await stream(store, [target], StreamState(state_path), Settings(once=True, give_up_s=1))
        assert not state_path.exists()
        receiver = SyslogReceiver()
        server = await asyncio.start_server(receiver.handle, "127.0.0.1", port)
        try:
            assert await stream(store, [target], StreamState(state_path), QUICK) == {f"syslog://127.0.0.1:{port}": 40}
            await target.close()
            await until("every frame read", lambda: len(receiver.frames) == 40, timeout_s=30)
        finally:
            server.close()
            await server.wait_closed()
    finally:
        await target.close()
    assert [e["seq"] for e in receiver.received.chain()] == list(range(1, 41))
    assert {int(m.group(1)) for m in receiver.frames} == {13 * 8 + 6}  # facility log audit, informational
    assert {m.group(4) for m in receiver.frames} == {b"proofbot"}


async def test_the_cli_streams_to_both_targets_once_and_says_where_each_stands(
        store: AuditStore, webhook: tuple[Webhook, str], tmp_path: Path) -> None:
    hook, url = webhook
    hook.authorization = f"Splunk {TOKEN}"
    receiver = SyslogReceiver()
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    db = tmp_path / "audit.db"
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "--db", str(db), "audit", "stream", "--to", url,
            "--syslog", f"127.0.0.1:{port}", "--state", str(tmp_path / "s.json"), "--once",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PROOFBOT_LOG_FORMAT": "json", "PROOFBOT_STREAM_AUTHORIZATION": f"Splunk {TOKEN}"})
        out, err = await asyncio.wait_for(process.communicate(), 60)
        await until("every frame read", lambda: len(receiver.frames) == 40, timeout_s=30)
    finally:
        server.close()
        await server.wait_closed()
    assert process.returncode == 0, err.decode()
    assert TOKEN not in out.decode() + err.decode()
    assert out.decode().splitlines() == [f"40 event(s) sent to {url}; acknowledged up to seq 40",
                                         f"40 event(s) sent to syslog://127.0.0.1:{port}; acknowledged up to seq 40"]
    assert len(hook.received.chain()) == 40 and len(receiver.received.chain()) == 40
    saved = json.loads((tmp_path / "s.json").read_text())["targets"]
    assert set(saved) == {url, f"syslog://127.0.0.1:{port}"} and {c["seq"] for c in saved.values()} == {40}


def test_a_hand_edited_event_still_makes_one_well_formed_syslog_message() -> None:
    """A database edited by hand may hold anything in kind, at or hash: the header stays RFC 5424 (NILVALUE where
    a value does not fit, SD values escaped) and the octet count frames exactly one message."""
    hostile = {"seq": 7, "hash": 'ab"] [x y="z', "prev_hash": "0" * 64, "at": "yesterday at noon",
               "kind": "finished\n<13>1 - forged", "operation_id": None, "operation": None, "host": None,
               "actor": None, "details": {"line": "two\nlines"}}
    frame = syslog_frame(hostile, "proofbot-host", 42)
    length, _, message = frame.partition(b" ")
    assert int(length) == len(message)
    header = re.match(rb'^<110>1 - proofbot-host proofbot 42 - \[proofbot@32473 seq="7" '
                      rb'hash="((?:[^"\\\]]|\\["\\\]])*)" prev_hash="0{64}"\] \xef\xbb\xbf', message)
    assert header, message[:160]
    assert header.group(1) == rb'ab\"\] [x y=\"z'
    assert json.loads(message[header.end():]) == hostile and b"\n" not in message


async def test_without_once_it_follows_the_log(store: AuditStore, webhook: tuple[Webhook, str],
                                               tmp_path: Path) -> None:
    hook, url = webhook
    target = HttpTarget(url)
    following = asyncio.create_task(stream(store, [target], StreamState(tmp_path / "s.json"),
                                           Settings(batch_events=50, poll_s=0.05)))
    try:
        await until("the log so far", lambda: len(hook.received.kept) == 40, timeout_s=20)
        await record_operations(store, 2, first=20)
        await until("the events written since", lambda: len(hook.received.kept) == 44, timeout_s=20)
        # the receiver has them before the stream hears its answer and moves the cursor
        await until("the cursor moved on", lambda: StreamState(tmp_path / "s.json").cursor(url).seq == 44,
                    timeout_s=20)
        assert not following.done()
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await target.close()
    assert [e["seq"] for e in hook.received.chain()] == list(range(1, 45))


@pytest.mark.parametrize(("words", "said"), [
    (["audit", "--to", "http://siem.example/x"], "--to, --syslog, --state and --once go with `proofbot audit stream`"),
    (["audit", "stream"], "audit stream needs a target"),
    (["audit", "stream", "--to", "http://siem.example/x", "--once"], "no audit database at"),
])
def test_bad_usage_exits_2_saying_what_to_do(words: list[str], said: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli.main import main

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level  # the stream sets up its logging: give pytest's back
    try:
        assert main(["--db", str(tmp_path / "none.db"), *words]) == 2
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing created
