"""Tier 1: health and probe over an SSH direct-tcpip channel: bounded as a whole, body capped, nothing listening.

The hostile endpoints are real servers (tests/drip_server.py) reached FROM the loopback
host through its in-process SSH server, as a service on a host would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import pytest_asyncio
from asyncssh.constants import MSG_CHANNEL_OPEN, MSG_IGNORE
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bot.demo.host import DemoHost, demo_host
from commands.checks.health import HttpOutcome, health_finding
from commands.host_http import _ascii_host, _default_ssl_context, _headers, fetch_via_host, run_probe
from commands.operation import Origin
from commands.restart import plan_restart, restart
from commands.ssh import connect
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.drip_server import port_of, serve
from tests.lab.waits import until
from tests.test_restart_loopback import GOOD_FLAGS, inventory_host


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def lab() -> AsyncIterator[DemoHost]:
    async with demo_host("ct160", patched=False, extra_file=False, flags=GOOD_FLAGS) as host:
        yield host


async def fetch(lab: DemoHost, url: str, **options: Any) -> HttpOutcome:
    async with connect(inventory_host(lab)) as conn:
        return await fetch_via_host(conn, url, **options)


def listening_sockets() -> dict[str, str]:
    """This process's listening TCP sockets: inode -> local address (from /proc, no psutil)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:[") : -1])
    found = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in ours:  # 0A: TCP_LISTEN
                found[fields[9]] = fields[1]
    return found


async def test_a_slow_drip_body_fails_health_by_its_deadline_saying_so(lab: DemoHost, tmp_path: Path) -> None:
    server, stats = await serve("drip-body")
    async with server:
        host = inventory_host(lab, health_url=f"http://127.0.0.1:{port_of(server)}/health", probe=None)
        audit = AuditStore.open(tmp_path / "a.db")
        try:
            result = await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
        finally:
            audit.close()
    health = next(f for f in result.checks if f.name == "health")
    assert health.status == "fail"
    assert "HTTP 200 came, then the endpoint sent" in health.summary
    assert "bytes in 5 s and never finished: slow drip" in health.summary
    assert health.evidence is not None and "slow drip" in health.evidence.output
    assert {f.name: f.status for f in result.checks}["main-pid"] == "pass"
    assert stats.accepted == 1


async def test_a_status_line_dripped_byte_by_byte_is_a_slow_drip(lab: DemoHost) -> None:
    server, stats = await serve("drip-head")
    async with server:
        outcome = await fetch(lab, f"http://127.0.0.1:{port_of(server)}/health", timeout_s=2)
    assert outcome.status is None
    assert outcome.problem.startswith("the endpoint sent ")
    assert outcome.problem.endswith("bytes in 2 s and never finished: slow drip")
    assert 0 < int(outcome.problem.split()[3]) <= stats.sent
    assert health_finding(outcome).status == "fail"


async def test_an_endpoint_that_never_writes_is_no_answer(lab: DemoHost) -> None:
    server, _ = await serve("silent")
    async with server:
        outcome = await fetch(lab, f"http://127.0.0.1:{port_of(server)}/health", timeout_s=1)
    assert (outcome.status, outcome.problem) == (None, "no answer within 1 s")


async def test_an_endless_body_is_cut_at_the_cap_and_the_channel_hung_up(lab: DemoHost) -> None:
    server, stats = await serve("endless")
    async with server:
        host = inventory_host(lab, probe={"url": f"http://127.0.0.1:{port_of(server)}/v1/chat/completions",
                                          "json": {"model": "default"}, "timeout_s": 30})
        assert host.service is not None and host.service.probe is not None
        async with connect(host) as conn:
            finding = await run_probe(conn, host.service.probe)
        # proofbot stopped reading and closed the channel: the host side of it hangs up on the server.
        await until("the endless server's connection ended", lambda: stats.ended == 1)
    assert finding.status == "fail"
    assert "HTTP 200, then the body passed 64 KiB: not read further, not judged" in finding.summary


async def test_nothing_listens_in_the_bot_during_a_verify_and_a_restart_poll(lab: DemoHost, tmp_path: Path) -> None:
    before = listening_sockets()
    seen: dict[str, str] = {}
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            seen.update(listening_sockets())
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        host = inventory_host(lab)
        verified = await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
        restarted = await restart(await plan_restart(host), origin=Origin.local_user(), audit=audit, settle_s=1.0)
    finally:
        stop.set()
        await sampler
        audit.close()
    statuses = {f.name: f.status for f in verified.checks}
    assert statuses["health"] == "pass" and statuses["probe"] == "pass", statuses
    assert restarted.verdict == "pass", [f.to_json() for f in restarted.checks if f.status != "pass"]
    assert restarted.stats["polls"] >= 2
    assert set(seen) - set(before) == set(), f"listening sockets opened meanwhile: {seen}"


def _tls_pair(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A throwaway CA and a server certificate for 127.0.0.1: (server context, client context trusting the CA)."""
    now = datetime.datetime.now(datetime.UTC)

    def cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: ec.EllipticCurvePrivateKey,
             ca: bool) -> x509.Certificate:
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(hours=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = cert("proofbot test CA", ca_key, "proofbot test CA", ca_key, True)
    leaf = cert("127.0.0.1", leaf_key, "proofbot test CA", ca_key, False)
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "leaf.key").write_bytes(leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "leaf.pem", tmp_path / "leaf.key")
    client = ssl.create_default_context(cadata=ca_cert.public_bytes(serialization.Encoding.PEM).decode())
    return server, client


async def test_https_runs_tls_over_the_channel_and_still_verifies_the_certificate(lab: DemoHost,
                                                                                   tmp_path: Path) -> None:
    server_tls, client_tls = _tls_pair(tmp_path)
    server, stats = await serve("ok", ssl_context=server_tls)
    port = port_of(server)
    async with server:
        url = f"https://127.0.0.1:{port}/health"
        trusted = await fetch(lab, url, ssl_context=client_tls)
        untrusted = await fetch(lab, url)  # certifi's CAs, as before: this CA is not among them
    assert (trusted.status, trusted.body) == (200, "ok"), trusted.problem
    assert stats.requests[0].startswith(b"GET /health HTTP/1.1\r\n")
    assert f"host: 127.0.0.1:{port}".encode() in stats.requests[0].lower()
    assert untrusted.status is None and "CERTIFICATE_VERIFY_FAILED" in untrusted.problem


async def test_plain_http_loads_no_ca_bundle(lab: DemoHost) -> None:
    """Loading certifi's CAs costs tens of ms of CPU on the event loop: only https pays it."""
    _default_ssl_context.cache_clear()
    server, _ = await serve("ok")
    async with server:
        outcome = await fetch(lab, f"http://127.0.0.1:{port_of(server)}/health")
    assert outcome.status == 200
    assert _default_ssl_context.cache_info().currsize == 0


@pytest.mark.parametrize("userinfo", ["alice:s3cret@"])
async def test_url_userinfo_is_neither_sent_nor_in_the_host_header(lab: DemoHost, userinfo: str) -> None:
    server, stats = await serve("ok")
    async with server:
        outcome = await fetch(lab, f"http://{userinfo}127.0.0.1:{port_of(server)}/health")
    assert outcome.status == 200
    assert b"s3cret" not in stats.requests[0] and b"alice" not in stats.requests[0]
    assert b"authorization" not in stats.requests[0].lower()


def test_the_callers_headers_win_over_the_defaults_but_the_body_is_never_compressed() -> None:
    sent = _headers("127.0.0.1", 8000, False, {"host": "api.internal", "ACCEPT-ENCODING": "gzip", "X-Key": "v"}, b"{}")
    assert sent == [("Accept", "*/*"), ("User-Agent", "proofbot"), ("Content-Length", "2"),
                    ("Content-Type", "application/json"), ("host", "api.internal"), ("X-Key", "v"),
                    ("Accept-Encoding", "identity")]
    # the Host header names the port only when it is not the scheme's; an IPv6 address in brackets
    assert _headers("::1", 443, True, {}, None)[0] == ("Host", "[::1]")
    assert _headers("::1", 8443, True, {}, None)[0] == ("Host", "[::1]:8443")
    assert _ascii_host("bücher.example") == "xn--bcher-kva.example"


@dataclass
class KeepAliveStats:
    connections: int = 0
    requests: list[tuple[int, bytes]] = field(default_factory=list)  # (connection number, path)


@contextlib.asynccontextmanager
async def keep_alive_server() -> AsyncIterator[tuple[int, KeepAliveStats]]:
    """An HTTP/1.1 endpoint that keeps each connection for the next request; ``/hang`` never answers."""
    stats = KeepAliveStats()
    handlers: set[asyncio.Task[Any]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        stats.connections += 1
        number = stats.connections
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                path = head.split()[1]
                stats.requests.append((number, path))
                if path == b"/hang":
                    await asyncio.Event().wait()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], stats
    finally:
        server.close()
        for task in handlers:  # a /hang handler waits for ever: its connection is closed here, not left to GC
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


async def test_requests_asked_together_to_one_port_share_one_channel_and_a_later_one_opens_its_own(
        lab: DemoHost) -> None:
    async with keep_alive_server() as (port, stats), connect(inventory_host(lab)) as conn:
        health, probe = await asyncio.gather(fetch_via_host(conn, f"http://127.0.0.1:{port}/health"),
                                             fetch_via_host(conn, f"http://127.0.0.1:{port}/v1/chat/completions",
                                                            method="POST", json_body={"a": 1}))
        assert (health.status, probe.status) == (200, 200)
        assert stats.requests == [(1, b"/health"), (1, b"/v1/chat/completions")], "health first, one channel"
        # asked after (a restart's poll): never on a connection the service accepted before
        later = await fetch_via_host(conn, f"http://127.0.0.1:{port}/health")
        assert later.status == 200 and stats.requests[-1] == (2, b"/health")


async def test_a_health_that_hangs_holds_the_probe_back_only_for_the_lane_wait(lab: DemoHost,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("commands.host_http.LANE_WAIT_S", 0.3)
    done: list[str] = []

    async def fetched(url: str, timeout_s: float) -> HttpOutcome:
        outcome = await fetch_via_host(conn, url, timeout_s=timeout_s)
        done.append(url.rsplit("/", 1)[1])
        return outcome

    async with keep_alive_server() as (port, stats), connect(inventory_host(lab)) as conn:
        health, probe = await asyncio.gather(fetched(f"http://127.0.0.1:{port}/hang", 3),
                                             fetched(f"http://127.0.0.1:{port}/completions", 5))
    assert health.status is None and health.problem == "no answer within 3 s"
    assert probe.status == 200 and done == ["completions", "hang"], "answered on its own channel meanwhile"
    assert [number for number, _ in stats.requests] == [1, 2]


async def test_a_verify_sends_no_ignore_packets_over_gcm_and_opens_one_channel_for_health_and_probe(
        lab: DemoHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[int] = []
    ciphers: list[object] = []
    original = asyncssh.connection.SSHConnection.send_packet

    def counted(self: asyncssh.connection.SSHConnection, pkttype: int, *args: bytes, **kwargs: Any) -> None:
        if isinstance(self, asyncssh.SSHClientConnection):  # the lab host's server is in this process too
            sent.append(pkttype)
            ciphers.append(self.get_extra_info("send_cipher"))
        original(self, pkttype, *args, **kwargs)

    monkeypatch.setattr(asyncssh.connection.SSHConnection, "send_packet", counted)
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        verified = await verify(VerifyPlan.for_host(inventory_host(lab), None), origin=Origin.local_user(), audit=audit)
    finally:
        audit.close()
    statuses = {f.name: f.status for f in verified.checks}
    assert statuses["health"] == "pass" and statuses["probe"] == "pass", statuses
    # the host's health_url and probe share a port: one exec session and one direct-tcpip channel
    assert sent.count(MSG_CHANNEL_OPEN) == 2, sent
    assert MSG_IGNORE not in sent, "no empty MSG_IGNORE before each packet"
    assert ciphers[-1] == "aes128-gcm@openssh.com"  # the server (asyncssh's own order: chacha20 first) takes ours
