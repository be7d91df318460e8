"""Tier 1: the SSH boundary against an in-process server: framing, host keys, failures mapped once."""

from __future__ import annotations

import socket
from pathlib import Path

import asyncssh
import pytest
import yaml

from bot.demo.host import DemoHost
from commands.errors import CommandTimedOut, HostKeyNotVerified, HostUnreachable
from commands.inventory import Host, parse_inventory
from commands.ssh import connect


def host_of(lab: DemoHost, **ssh: object) -> Host:
    document = lab.inventory()
    document["ssh"].update(ssh)
    return parse_inventory(yaml.safe_dump(document), "test.yml").host(lab.name)


async def test_batch_keeps_each_commands_output_and_status_apart(clean_host: DemoHost) -> None:
    async with connect(host_of(clean_host)) as conn:
        results = await conn.run_batch([
            ["printf", "no newline"], ["sh", "-c", "echo out; echo err >&2; exit 3"], ["true"],
            ["printf", "%s\\n", "line1", "line2"],
        ])
        assert conn.exec_round_trips == 1
    assert [r.exit_status for r in results] == [0, 3, 0, 0]
    assert results[0].output == b"no newline"
    assert results[1].output.splitlines() == [b"out", b"err"] or set(results[1].output.splitlines()) == {
        b"out", b"err"}
    assert results[2].output == b""
    assert results[3].output == b"line1\nline2\n"


GUESSED_NONCE = "0123456789abcdef"
# Command 0 prints its own `end` marker with a fake exit status 0, then really exits 7.
FORGE_WITH_GUESS = ["sh", "-c", f"printf '\\n%s end 0 0 1.0\\n' {GUESSED_NONCE}; exit 7"]
# The same, with the nonce looked for in the batch shell's argv in /proc, as any process on the
# host can read it: the script (and its nonce) must never be there.
FORGE_WITH_REAL_NONCE = ["sh", "-c", "n=$(tr '\\0' '\\n' </proc/$PPID/cmdline | grep -o '[0-9a-f]\\{16\\} start' | "
                                     "head -n 1 | cut -d ' ' -f 1); printf '\\n%s end 0 0 1.0\\n' \"$n\"; exit 7"]


async def test_output_cannot_forge_its_own_exit_status_without_the_nonce(clean_host: DemoHost) -> None:
    async with connect(host_of(clean_host)) as conn:
        results = await conn.run_batch([FORGE_WITH_GUESS, ["false"]])
    assert [r.exit_status for r in results] == [7, 1]
    assert results[0].output == f"\n{GUESSED_NONCE} end 0 0 1.0\n".encode()
    assert results[1].output == b""


async def test_output_cannot_forge_its_own_exit_status_with_the_real_nonce(clean_host: DemoHost) -> None:
    async with connect(host_of(clean_host)) as conn:
        results = await conn.run_batch([FORGE_WITH_REAL_NONCE, ["false"]])
    assert [r.exit_status for r in results] == [7, 1]
    assert results[1].output == b""


async def test_shell_metacharacters_in_arguments_stay_literal(clean_host: DemoHost, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    async with connect(host_of(clean_host)) as conn:
        result = await conn.run(["echo", f"x; touch {canary}", f"$(touch {canary})", f"`touch {canary}`"])
    assert not canary.exists()
    assert result.text.startswith("x; touch")


def assert_names_host_and_file(error: Exception, lab: DemoHost, known_hosts: Path) -> None:
    """README: an unknown or changed key is an error naming the host and the file."""
    said = str(error)
    assert said.startswith(f"{lab.name} ") or said.startswith(f"{lab.name}:"), said
    assert str(known_hosts) in said, said


async def test_unknown_host_key_is_refused(clean_host: DemoHost, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{clean_host.ssh_port} {other}\n")
    with pytest.raises(HostKeyNotVerified) as raised:
        async with connect(host_of(clean_host, known_hosts=str(known))):
            pass
    assert_names_host_and_file(raised.value, clean_host, known)


async def test_host_missing_from_known_hosts_is_refused(clean_host: DemoHost, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    with pytest.raises(HostKeyNotVerified) as raised:
        async with connect(host_of(clean_host, known_hosts=str(known))):
            pass
    assert_names_host_and_file(raised.value, clean_host, known)


async def test_missing_known_hosts_file_is_refused(clean_host: DemoHost, tmp_path: Path) -> None:
    with pytest.raises(HostKeyNotVerified, match="does not exist") as raised:
        async with connect(host_of(clean_host, known_hosts=str(tmp_path / "nope"))):
            pass
    assert_names_host_and_file(raised.value, clean_host, tmp_path / "nope")


async def test_closed_port_is_unreachable(clean_host: DemoHost) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free_port = sock.getsockname()[1]
    document = clean_host.inventory()
    document["hosts"][clean_host.name]["port"] = free_port
    host = parse_inventory(yaml.safe_dump(document), "t.yml").host(clean_host.name)
    with pytest.raises(HostUnreachable, match="cannot connect"):
        async with connect(host):
            pass


async def test_silent_listener_times_out_as_unreachable(clean_host: DemoHost) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        document = clean_host.inventory()
        document["ssh"]["connect_timeout_s"] = 0.5
        document["hosts"][clean_host.name]["port"] = listener.getsockname()[1]
        host = parse_inventory(yaml.safe_dump(document), "t.yml").host(clean_host.name)
        with pytest.raises(HostUnreachable):
            async with connect(host):
                pass


async def test_slow_command_times_out(clean_host: DemoHost) -> None:
    async with connect(host_of(clean_host, command_timeout_s=0.5)) as conn:
        with pytest.raises(CommandTimedOut, match=r"0\.5 s"):
            await conn.run(["sleep", "5"])


async def test_stop_on_failure_ends_the_batch_and_cleanup_runs(clean_host: DemoHost, tmp_path: Path) -> None:
    tmp_file, never = tmp_path / "tmp-copy", tmp_path / "never"
    async with connect(host_of(clean_host)) as conn:
        results = await conn.run_batch(
            [["touch", str(tmp_file)], ["test", "-e", str(tmp_file)], ["false"], ["touch", str(never)]],
            stop_on_failure=True, cleanup=[str(tmp_file)])
    assert [r.exit_status for r in results] == [0, 0, 1]
    assert not never.exists(), "commands after a failure must not run"
    assert not tmp_file.exists(), "cleanup paths are removed when the batch ends"
