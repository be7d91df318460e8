"""Tier-1 hosts for bench/fleet_bench.py's scale figures: many in-process asyncssh servers in one process.

Each server has its own host key and port and runs every command in a real ``/bin/sh``
(bot.demo.host's process factory), on this machine's files: the bench lays out one backup,
one watch dir and one real service process that every "host" shares, and puts a stand-in
``systemctl`` (which prints that service's real PID) first in PATH. The servers' own CPU is
theirs, in this process: the proofbot process measured is the client alone.

Run by the bench: python -m bench.scale_hosts --count N --out HOSTS.json --authorized KEYS --path-dir DIR;
it writes the ports and host keys to HOSTS.json, then serves until its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import asyncssh

from bot.demo.host import Logins, _CommandServer, _run_command


async def serve(count: int, out: str, authorized: str) -> None:
    logins = Logins()
    servers: list[asyncssh.SSHAcceptor] = []
    hosts = []
    for _ in range(count):
        key = asyncssh.generate_private_key("ssh-ed25519")
        server = await asyncssh.listen(
            "127.0.0.1", 0, server_factory=lambda: _CommandServer(logins), server_host_keys=[key],
            authorized_client_keys=authorized, process_factory=_run_command, encoding=None, allow_scp=False,
            backlog=1024,
        )
        servers.append(server)
        hosts.append({"port": int(server.sockets[0].getsockname()[1]),
                      "host_key": key.export_public_key().decode().strip()})
    # Written whole, then renamed: the bench waits for the file and never reads half of it.
    Path(out + ".tmp").write_text(json.dumps(hosts))  # noqa: ASYNC240 (once, before serving)
    os.replace(out + ".tmp", out)
    loop = asyncio.get_running_loop()
    closed = asyncio.Event()
    loop.add_reader(sys.stdin.fileno(), closed.set)
    await closed.wait()
    for server in servers:
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--authorized", required=True)
    parser.add_argument("--path-dir", required=True, help="put first in PATH (the stand-in systemctl)")
    args = parser.parse_args()
    os.environ["PATH"] = f"{args.path_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    asyncio.run(serve(args.count, args.out, args.authorized))
    return 0


if __name__ == "__main__":
    sys.exit(main())
