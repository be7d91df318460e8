"""The floor for bench/fleet_bench.py: the least any tool could do for the same work.

A fresh Python process that imports only asyncssh, opens one connection per host (host key
checked against known_hosts, the same client key), runs the one batched script proofbot's
verify runs (plus health and the probe with curl, which proofbot sends over a channel of
the same connection) with ``sh -s``, reads every byte, and exits. No parsing, no audit log,
no evidence: whatever proofbot spends above this is its own.

Run by the bench: python bench/floor_child.py SPEC.json (a list of hosts, see fleet_bench).
"""

import asyncio
import json
import sys

import asyncssh


async def one(host: dict[str, object]) -> int:
    async with asyncssh.connect(
        str(host["address"]), int(str(host["port"])), username=str(host["user"]),
        known_hosts=str(host["known_hosts"]), client_keys=[str(host["client_key"])],
        config=None, agent_path=None, password=None, kbdint_auth=False,
    ) as conn:
        result = await conn.run("sh -s", input=str(host["script"]).encode(), encoding=None, check=False)
        return len(result.stdout or b"")


async def main(hosts: list[dict[str, object]]) -> int:
    sizes = await asyncio.gather(*(one(host) for host in hosts))
    print(json.dumps({"hosts": len(sizes), "bytes": sum(sizes)}))
    return 0


if __name__ == "__main__":
    with open(sys.argv[1]) as spec:
        sys.exit(asyncio.run(main(json.load(spec))))
