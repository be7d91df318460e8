"""A lab host on loopback for ``proofbot demo`` and the fast tests: no root, no network.

An in-process asyncssh server with a throwaway host key runs each command in a real
subprocess; a real supervisord (started unprivileged) runs the demo service; the files
sit under a temporary root laid out like ct129 after the seed's failed rollback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
import httpx

from bot.demo.wheel import make_env, pip_install, site_packages, write_source

SERVICE_SCRIPT = Path(__file__).with_name("service.py")
SITE = "ml-env/lib/python3.12/site-packages/sglang/srt"
ORIGINAL_FILES = {
    "spec_info.py": 'SPECULATIVE_ALGORITHMS = ("EAGLE", "NEXTN")\n',
    "eagle_info.py": "class EagleDraftInput:\n    topk = 1\n",
}
# A small real distribution beside the hand-laid sglang files, with NO backup in the inventory:
# only its own RECORD can tell that the seed's kind of patch (one module edited, one added) happened.
DIST = "sgl-kernel"
DIST_VERSION = "0.1.4"
DIST_MODULES = {"__init__.py": "from .speculative import ALGORITHMS\n",
                "speculative.py": 'ALGORITHMS = ("EAGLE", "NEXTN")\n'}
PATCHED_DIST_MODULE = 'ALGORITHMS = ("EAGLE", "NEXTN", "DDTREE")\nfrom .ddtree_kernels import build_tree\n'
PATCHED_SPEC_INFO = 'SPECULATIVE_ALGORITHMS = ("EAGLE", "NEXTN", "DDTREE")\nfrom .ddtree_utils import build_tree\n'


@dataclass
class Logins:
    """Logins the lab host's SSH server has seen: in all, open now, the most open at once; forwards asked."""

    total: int = 0
    open: int = 0
    peak: int = 0
    forwards: list[tuple[str, int]] = field(default_factory=list)  # direct-tcpip targets asked for


class _CommandServer(asyncssh.SSHServer):
    def __init__(self, logins: Logins) -> None:
        self._logins = logins
        self._counted = False

    def auth_completed(self) -> None:
        self._counted = True
        self._logins.total += 1
        self._logins.open += 1
        self._logins.peak = max(self._logins.peak, self._logins.open)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted:
            self._logins.open -= 1

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        # Forwarding is what the health check rides on; only loopback targets are allowed.
        self._logins.forwards.append((dest_host, dest_port))
        return dest_host in ("127.0.0.1", "localhost", "::1")


async def _run_command(process: asyncssh.SSHServerProcess[bytes]) -> None:
    command = process.command or "true"
    # The venv's bin first, so the demo finds the supervisorctl installed with proofbot.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    child = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    # Pumped by hand, not with process.redirect(): exit() must come after every byte of
    # output was written, and the stdin redirect leaves an un-awaited coroutine behind.
    stdin_task = asyncio.create_task(_pump_stdin(process, child))
    assert child.stdout is not None and child.stderr is not None
    pumps: asyncio.Future[Any] = asyncio.gather(_pump_out(child.stdout, process.stdout),
                                                       _pump_out(child.stderr, process.stderr))
    hung_up: asyncio.Future[Any] = asyncio.ensure_future(process.channel.wait_closed())
    await asyncio.wait([pumps, hung_up], return_when=asyncio.FIRST_COMPLETED)
    if not pumps.done():
        # The client hung up (a timeout, a dropped link): nobody waits for this command, nor its children.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
    await pumps
    status = await child.wait()
    hung_up.cancel()
    stdin_task.cancel()
    process.exit(status)


async def _pump_out(source: asyncio.StreamReader, sink: asyncssh.SSHWriter[bytes]) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (OSError, asyncssh.Error):
        pass


async def _pump_stdin(process: asyncssh.SSHServerProcess[bytes], child: asyncio.subprocess.Process) -> None:
    assert child.stdin is not None
    try:
        while data := await process.stdin.read(65536):
            child.stdin.write(data)
            await child.stdin.drain()
    except (OSError, asyncssh.Error):
        pass
    finally:
        child.stdin.close()


@dataclass
class DemoHost:
    """Everything a test or the demo needs to point an inventory at the lab host."""

    name: str
    root: Path
    ssh_port: int
    http_port: int
    known_hosts: Path
    client_key: Path
    supervisor_config: Path
    python: Path | None = None
    logins: Logins = field(default_factory=Logins)

    @property
    def dist_dir(self) -> Path:
        """The installed package dir of DIST (only when the host was started with ``packages=True``)."""
        assert self.python is not None, "demo host started without packages"
        return site_packages(self.python) / DIST.replace("-", "_")

    async def reinstall_dist(self) -> str:
        """What ``package:`` says to do, offline: move the unlisted module aside, then force-reinstall."""
        aside = self.root / "moved-aside"
        aside.mkdir(exist_ok=True)
        for extra in self.dist_dir.glob("ddtree_*.py"):
            extra.rename(aside / extra.name)
        assert self.python is not None
        source = self.root / "src" / f"{DIST.replace('-', '_')}-src"
        return await pip_install(self.python, "--force-reinstall", str(source))

    @property
    def live_dir(self) -> Path:
        return self.root / SITE / "speculative"

    @property
    def backup_dir(self) -> Path:
        return self.root / "sglang-ddtree-backup-20260522"

    def inventory(self, **service_overrides: Any) -> dict[str, Any]:
        service: dict[str, Any] = {
            "manager": "supervisord",
            "unit": "sglang",
            "supervisor_config": str(self.supervisor_config),
            "health_url": f"http://127.0.0.1:{self.http_port}/health",
            "expect_flags": ["--speculative-algorithm NEXTN"],
            "forbid_flags": ["--enable-ddtree"],
            "ready_timeout_s": 30,
            "min_startup_s": 0,
            "probe": {"url": f"http://127.0.0.1:{self.http_port}/v1/chat/completions",
                      "json": {"model": "default", "messages": [{"role": "user", "content": "Say OK"}],
                               "max_tokens": 8},
                      "timeout_s": 10, "expect": "OK"},
        }
        service.update(service_overrides)
        return {
            "ssh": {"user": os.environ.get("USER") or _current_user(), "known_hosts": str(self.known_hosts),
                    "client_keys": [str(self.client_key)], "connect_timeout_s": 5, "command_timeout_s": 20},
            "approvals": {"approvers": ["UAPPROVER"], "allow_self_approval": False, "expire_after_s": 900},
            "hosts": {self.name: {
                "address": "127.0.0.1", "port": self.ssh_port, "service": service,
                "backups": {"pre-ddtree": {
                    "dir": str(self.backup_dir),
                    "files": {name: str(self.live_dir / name) for name in ORIGINAL_FILES},
                    "watch": [str(self.live_dir)],
                }},
                **({"packages": {"python": str(self.python), "dists": [DIST]}} if self.python else {}),
            }},
        }

    async def change_launch_flags(self, flags: list[str]) -> str:
        """What an operator does to fix the launch config: edit it, then reread and update it."""
        text = self.supervisor_config.read_text()
        start = text.index("command=") + len("command=")
        end = text.index("\n", start)
        self.supervisor_config.write_text(text[:start] + _service_command(self.http_port, flags) + text[end:])
        said = await self.supervisorctl("reread") + await self.supervisorctl("update", "sglang")
        await _wait_running(self, 20)
        return said

    async def supervisorctl(self, *args: str) -> str:
        child = await asyncio.create_subprocess_exec(
            *_supervisor_bin("supervisorctl"), "-c", str(self.supervisor_config), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await child.communicate()
        return out.decode()


def _current_user() -> str:
    import getpass

    return getpass.getuser()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def supervisord_available() -> bool:
    return Path(sys.executable).with_name("supervisord").exists() or shutil.which("supervisord") is not None


def _supervisor_bin(name: str) -> list[str]:
    local = Path(sys.executable).with_name(name)
    return [str(local)] if local.exists() else [name]


def _lay_out_files(root: Path, *, patched: bool, extra_file: bool) -> None:
    live = root / SITE / "speculative"
    backup = root / "sglang-ddtree-backup-20260522"
    live.mkdir(parents=True)
    backup.mkdir(parents=True)
    for name, text in ORIGINAL_FILES.items():
        (backup / name).write_text(text)
        (live / name).write_text(text)
    if patched:
        (live / "spec_info.py").write_text(PATCHED_SPEC_INFO)
    if extra_file:
        (live / "ddtree_utils.py").write_text("def build_tree():\n    return '!!!!!!!!'\n")


async def _install_dist(root: Path, *, patched: bool) -> Path:
    """DIST built and installed by pip into ``<root>/ml-env``; then patched as the seed's sglang was."""
    python = await make_env(root / "ml-env")
    await pip_install(python, str(write_source(root / "src", DIST, DIST_VERSION, DIST_MODULES)))
    if patched:
        package = site_packages(python) / DIST.replace("-", "_")
        (package / "speculative.py").write_text(PATCHED_DIST_MODULE)
        (package / "ddtree_kernels.py").write_text("def build_tree():\n    return '!!!!!!!!'\n")
    return python


def _service_command(http_port: int, flags: list[str]) -> str:
    return shlex.join([sys.executable, str(SERVICE_SCRIPT), "--host", "127.0.0.1", "--port", str(http_port), *flags])


def _supervisor_config(root: Path, http_port: int, flags: list[str]) -> Path:
    run = root / "supervisor"
    run.mkdir()
    command = _service_command(http_port, flags)
    config = run / "supervisord.conf"
    config.write_text(f"""[unix_http_server]
file={run}/supervisor.sock
chmod=0700

[supervisord]
logfile={run}/supervisord.log
pidfile={run}/supervisord.pid
nodaemon=false
directory={root}

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{run}/supervisor.sock

[program:sglang]
command={command}
startsecs=1
autorestart=true
stopasgroup=true
killasgroup=true
stdout_logfile={run}/sglang.log
redirect_stderr=true
""")
    return config


async def _wait_healthy(port: int, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    async with httpx.AsyncClient(timeout=1, trust_env=False) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(f"http://127.0.0.1:{port}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"demo service on 127.0.0.1:{port} did not become healthy in {deadline_s} s")


async def _wait_running(host: DemoHost, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if "RUNNING" in await host.supervisorctl("status", "sglang"):
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"supervisord did not report sglang RUNNING within {deadline_s} s")


@asynccontextmanager
async def demo_host(name: str = "ct129", *, patched: bool = True, extra_file: bool = True,
                    flags: list[str] | None = None, wait_ready: bool = True,
                    packages: bool = False) -> AsyncIterator[DemoHost]:
    """Start the loopback lab host; everything it started is stopped and removed on exit."""
    root = Path(tempfile.mkdtemp(prefix="proofbot-demo-"))
    server: asyncssh.SSHAcceptor | None = None
    supervisord: asyncio.subprocess.Process | None = None
    try:
        keys = root / "keys"
        keys.mkdir()
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key.write_private_key(str(keys / "id_ed25519"))
        (keys / "id_ed25519").chmod(0o600)  # as ssh-keygen writes it: ssh (and proofbot) ignore a key others can read
        client_key.write_public_key(str(keys / "authorized_keys"))
        _lay_out_files(root, patched=patched, extra_file=extra_file)
        python = await _install_dist(root, patched=patched) if packages else None
        http_port = _free_port()
        service_flags = flags if flags is not None else ["--speculative-algorithm", "NEXTN", "--enable-ddtree"]
        config = _supervisor_config(root, http_port, service_flags)
        supervisord = await asyncio.create_subprocess_exec(*_supervisor_bin("supervisord"), "-c", str(config))
        await supervisord.wait()
        logins = Logins()
        server = await asyncssh.listen(
            "127.0.0.1", 0, server_factory=lambda: _CommandServer(logins), server_host_keys=[host_key],
            authorized_client_keys=str(keys / "authorized_keys"), process_factory=_run_command,
            encoding=None, allow_scp=False,
        )
        ssh_port = int(server.sockets[0].getsockname()[1])
        known_hosts = keys / "known_hosts"
        known_hosts.write_text(f"[127.0.0.1]:{ssh_port} {host_key.export_public_key().decode().strip()}\n")
        host = DemoHost(name, root, ssh_port, http_port, known_hosts, keys / "id_ed25519", config, python, logins)
        if wait_ready:
            await _wait_healthy(http_port, 20)
            await _wait_running(host, 20)
        yield host
    finally:
        if server is not None:
            server.close()
            await server.wait_closed()
        if supervisord is not None:
            pidfile = root / "supervisor" / "supervisord.pid"
            await _stop_supervisord(pidfile)
        shutil.rmtree(root, ignore_errors=True)


async def _stop_supervisord(pidfile: Path) -> None:
    pid = _read_pid(pidfile)
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def _read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
