"""``proofbot ping``: can each host be reached, its key checked, logged into, and made to run a command?

The first thing to run against a new inventory (as ``ansible -m ping`` is): it changes
nothing on any host, and each host is bounded by its own deadline, so one that hangs never
holds the others (the fleet's bounded fan-out: at most ``fleet.max_parallel`` hosts at once).
"""

from __future__ import annotations

import asyncio
import time

from commands.errors import CouldNotCheck
from commands.findings import Evidence, Finding
from commands.fleet.run import run_bounded
from commands.inventory import FleetSettings, Host
from commands.ssh import connect
from commands.vocabulary import CheckStatus


async def ping(host: Host) -> Finding:
    """Connect (host key checked), run ``true``, and say who answered, how fast, with which key."""
    ssh = host.ssh
    started = time.monotonic()
    try:
        async with asyncio.timeout(ssh.connect_timeout_s + ssh.command_timeout_s):
            async with connect(host, idempotent=True) as conn:
                result = await conn.run(["true"])
                fingerprint = conn.host_key_fingerprint()
    except CouldNotCheck as exc:
        return Finding("ping", CheckStatus.ERROR, str(exc))
    except TimeoutError:
        return Finding("ping", CheckStatus.ERROR, f"{host.name}: no answer within "
                                                  f"{ssh.connect_timeout_s + ssh.command_timeout_s:g} s")
    elapsed = time.monotonic() - started
    evidence = Evidence.of(f"ssh -p {host.port} {ssh.user}@{host.address} true", result.exit_status,
                           f"host key {fingerprint}", elapsed)
    if result.exit_status != 0:
        return Finding("ping", CheckStatus.FAIL, f"logged in, but `true` exited {result.exit_status}", evidence)
    return Finding("ping", CheckStatus.PASS,
                   f"{ssh.user}@{host.address}:{host.port} in {elapsed * 1000:.0f} ms, host key "
                   f"{fingerprint} as in {', '.join(ssh.known_hosts_list())}", evidence)


async def ping_all(hosts: list[Host], fleet: FleetSettings) -> list[Finding]:
    """One finding per host, in the order given, ``fleet.max_parallel`` at a time."""
    return await run_bounded(hosts, ping, max_parallel=fleet.max_parallel)
