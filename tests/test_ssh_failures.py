"""The SSH boundary's one mapping (commands/ssh/failures.py ``as_error``): every exception class it maps, as a
recorded instance (pure) and, where a loopback server can provoke it, as a real failure through ``connect``.

Real failures provoked elsewhere, through the same function: an unknown host key, a closed port, a silent
listener and a slow command (tests/test_ssh.py), a dropped link (tests/test_verify_link_faults.py), sessions
past MaxSessions (tests/test_ssh_bounds.py), a bastion that cannot reach its host (tests/test_jump_lab.py).
"""

from __future__ import annotations

import ast
import inspect
import socket
from pathlib import Path

import asyncssh
import pytest
import yaml

from bot.demo.host import DemoHost
from commands.errors import (
    AuthenticationFailed,
    BastionUnreachable,
    CommandTimedOut,
    ConnectionLost,
    HostKeyNotVerified,
    HostUnreachable,
    ProofbotError,
)
from commands.inventory import Host, parse_inventory
from commands.known_hosts import Decision
from commands.ssh import connect
from commands.ssh.failures import At, HostKeyRefused, Step, as_error, through_bastion
from tests.conftest import REPO
from tests.source_ast import parse_source

INVENTORY = {"ssh": {"known_hosts": "/nowhere/known_hosts", "jump": "bastion"},
             "hosts": {"ct1": {"address": "10.0.0.1", "port": 2222}, "bastion": {"address": "10.0.0.9"}}}
HOST = parse_inventory(yaml.safe_dump(INVENTORY), "i.yml").host("ct1")
HOP = HOST.ssh.jump[0]
WHERE = "ct1 (10.0.0.1:2222)"
REFUSED_SESSION = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "open failed")

# (case, exception as asyncssh or the socket raises it, where, error class, its message)
CASES: list[tuple[str, BaseException, At, type[ProofbotError], str]] = [
    ("proofbot's decision refused the key",
     HostKeyRefused(Decision(False, "changed", "the host key changed (known_hosts:3)", hint="check out of band")),
     At(HOST, Step.CONNECT), HostKeyNotVerified,
     f"{WHERE}: host key not verified against /nowhere/known_hosts: the host key changed (known_hosts:3)"),
    ("asyncssh's own check refused the key", asyncssh.HostKeyNotVerifiable("Host key is not trusted"),
     At(HOST, Step.CONNECT), HostKeyNotVerified,
     f"{WHERE}: host key not verified against /nowhere/known_hosts: Host key is not trusted"),
    ("the login was refused", asyncssh.PermissionDenied("Permission denied"), At(HOST, Step.CONNECT),
     AuthenticationFailed, f"{WHERE}: user root was refused: Permission denied"),
    ("the bastion could not open the tunnel", asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED,
                                                                         "Connection refused"),
     At(HOST, Step.CONNECT, via=HOP), HostUnreachable,
     f"{WHERE}: the bastion bastion could not connect to it: Connection refused"),
    ("the host refused a channel", asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "Connection refused"),
     At(HOST, Step.CHANNEL), HostUnreachable, f"{WHERE}: the host refused a channel: Connection refused"),
    ("the server disconnected", asyncssh.DisconnectError(asyncssh.DISC_BY_APPLICATION, "bye"),
     At(HOST, Step.SESSION), ConnectionLost, f"{WHERE}: connection lost: bye"),
    ("the link dropped", asyncssh.ConnectionLost("Connection lost"), At(HOST, Step.SESSION), ConnectionLost,
     f"{WHERE}: connection lost: Connection lost"),
    ("no SSH answer in time", TimeoutError(), At(HOST, Step.CONNECT, timeout_s=0.5), HostUnreachable,
     f"{WHERE}: no SSH answer within 0.5 s"),
    ("sessions refused until the deadline", TimeoutError(),
     At(HOST, Step.SESSION, timeout_s=2, refused=(REFUSED_SESSION, REFUSED_SESSION)), HostUnreachable,
     f"{WHERE}: sshd refused a session channel 2 times in 2 s: open failed"),
    ("a command past its deadline", TimeoutError(), At(HOST, Step.SESSION, shown="sleep 5", timeout_s=0.5),
     CommandTimedOut, "ct1: command did not finish within 0.5 s: sleep 5"),
    ("a key asyncssh cannot use", asyncssh.KeyImportError("Invalid private key"), At(HOST, Step.CONNECT),
     HostKeyNotVerified, f"{WHERE}: cannot use SSH settings: Invalid private key"),
    ("a closed port", ConnectionRefusedError(111, "Connect call failed"), At(HOST, Step.CONNECT),
     HostUnreachable, f"{WHERE}: cannot connect: Connect call failed"),
    ("a socket's own timeout on a channel", TimeoutError(110, "Connection timed out"), At(HOST, Step.CHANNEL),
     HostUnreachable, f"{WHERE}: cannot connect: Connection timed out"),
    ("any other asyncssh error", asyncssh.ProcessError(None, "true", None, None, None, None, b"", b"", "odd"),
     At(HOST, Step.SESSION), ConnectionLost, f"{WHERE}: SSH error: odd"),
    ("the agent", FileNotFoundError(2, "No such file or directory"), At(HOST, Step.AGENT, shown="/run/agent.sock"),
     AuthenticationFailed, "ct1: cannot use the ssh agent at SSH_AUTH_SOCK=/run/agent.sock: "
                           "[Errno 2] No such file or directory"),
    ("a user certificate", asyncssh.KeyImportError("Invalid certificate"),
     At(HOST, Step.CERTIFICATE, shown="/k-cert.pub"), AuthenticationFailed,
     "ct1: cannot read user certificate /k-cert.pub: Invalid certificate"),
    ("a channel refused on a closed connection", asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "closed"),
     At(HOST, Step.SESSION, closed=True), ConnectionLost,
     f"{WHERE}: connection lost (the host refused a channel: closed)"),
]


@pytest.mark.parametrize(("exc", "at", "kind", "message"), [case[1:] for case in CASES], ids=[c[0] for c in CASES])
def test_each_exception_becomes_its_error(exc: BaseException, at: At, kind: type[ProofbotError],
                                          message: str) -> None:
    error = as_error(exc, at)
    assert type(error) is kind
    assert error.message == message


def test_every_class_and_step_the_mapping_names_has_a_case() -> None:
    """A branch added to as_error without a case here fails: the classes it tests against and its steps."""
    tree = parse_source(inspect.getsource(as_error))
    named = {ast.unparse(node.args[1]) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance"
             and ast.unparse(node.args[0]) == "exc"}
    classes = {part.strip() for name in named for part in name.split("|")}
    assert len(classes) >= 9
    covered = {type(case[1]) for case in CASES}
    for name in classes:
        wanted = eval(name, as_error.__globals__)  # a name as the module spells it: `asyncssh.X`, `OSError`
        assert any(issubclass(kind, wanted) for kind in covered), name
    assert {case[2].step for case in CASES} == set(Step)


def test_every_handler_at_the_boundary_maps_through_as_error() -> None:
    """An ``except`` for an asyncssh, socket or timeout exception anywhere in commands/ssh/ maps it with as_error
    (directly or through ``HostConnection.failed``), re-raises it to a handler that does, or ignores a failed close."""
    handlers = 0
    for path in sorted((REPO / "commands" / "ssh").glob("*.py")):
        for node in ast.walk(parse_source(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                continue
            caught = ast.unparse(node.type)
            if not any(name in caught for name in ("asyncssh", "OSError", "SSH_FAILURES", "TimeoutError")):
                continue
            handlers += 1
            body = "\n".join(ast.unparse(statement) for statement in node.body)
            reraised = any(isinstance(inner, ast.Raise) and inner.exc is None for inner in ast.walk(node))
            assert "as_error(" in body or ".failed(" in body or reraised or body == "pass", \
                f"{path.name}:{node.lineno}: except {caught}: {body}"
    assert handlers >= 8


def test_a_failed_bastion_is_said_once_for_the_hosts_behind_it() -> None:
    error = through_bastion(as_error(ConnectionRefusedError(111, "Connect call failed"), At(HOP, Step.CONNECT)),
                            (HOP,))
    assert type(error) is BastionUnreachable
    assert error.message == "could not reach the bastion bastion (10.0.0.9:22): cannot connect: Connect call failed"
    assert error.hint.endswith("; no host behind it was checked")


def host_of(lab: DemoHost, **ssh: object) -> Host:
    document = lab.inventory()
    document["ssh"].update(ssh)
    return parse_inventory(yaml.safe_dump(document), "test.yml").host(lab.name)


async def test_a_key_the_host_does_not_know_is_a_refused_login(clean_host: DemoHost, tmp_path: Path) -> None:
    stranger = tmp_path / "id_stranger"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    stranger.chmod(0o600)
    with pytest.raises(AuthenticationFailed, match=r"ct130 \(127\.0\.0\.1:\d+\): user \S+ was refused"):
        async with connect(host_of(clean_host, client_keys=[str(stranger)])):
            pass


async def test_a_certificate_that_is_not_one_is_refused_with_its_path(clean_host: DemoHost, tmp_path: Path) -> None:
    cert = tmp_path / "id-cert.pub"
    cert.write_text("ssh-ed25519-cert-v01@openssh.com AAAAnotacertificate\n")
    cert.chmod(0o600)
    with pytest.raises(AuthenticationFailed, match=f"ct130: cannot read user certificate {cert}: "):
        async with connect(host_of(clean_host, client_certs=[str(cert)])):
            pass


async def test_an_agent_that_is_not_there_is_refused_with_its_socket(clean_host: DemoHost, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "no-agent.sock"))
    with pytest.raises(AuthenticationFailed, match=f"cannot use the ssh agent at SSH_AUTH_SOCK={tmp_path}/no-agent"):
        async with connect(host_of(clean_host, agent=True)):
            pass


async def test_a_channel_the_host_cannot_open_is_unreachable(clean_host: DemoHost) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free_port = sock.getsockname()[1]
    async with connect(host_of(clean_host)) as conn:
        with pytest.raises(HostUnreachable, match=r"ct130 \(127\.0\.0\.1:\d+\): the host refused a channel: "):
            await conn.open_tcp("127.0.0.1", free_port)


async def test_a_session_on_a_connection_that_closed_is_a_lost_connection(clean_host: DemoHost) -> None:
    async with connect(host_of(clean_host)) as conn:
        conn._conn.close()  # the link going away under an operation: asyncssh then refuses the channel
        await conn._conn.wait_closed()
        with pytest.raises(ConnectionLost, match=r"ct130 \(127\.0\.0\.1:\d+\): connection lost"):
            await conn.run(["true"])
