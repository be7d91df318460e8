"""Benchmark: proofbot's host-key decision against a 10,000-line known_hosts (plain and hashed), per host and for
500 hosts, next to asyncssh's own ``match_known_hosts`` on the same file; and a tier-1 verify with and without
such a file.

No root needed. Run: .venv/bin/python -m bench.known_hosts_bench [--lines 10000] [--hosts 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hmac
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import asyncssh
import yaml

from bot.demo.host import demo_host
from commands import known_hosts_file
from commands.inventory import parse_inventory
from commands.known_hosts import decide, lookup_for, trust_for
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify

PORT = 2222


def name(index: int) -> str:
    return f"gpu{index:05d}.fleet.example"


def hashed(host: str) -> str:
    """HashKnownHosts' form of host (|1|salt|HMAC-SHA1), as ssh-keygen -H writes it."""
    salt = os.urandom(20)
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(hmac.digest(salt, host.encode(), 'sha1')).decode()}"


def write_file(path: Path, lines: int, keys: list[str], *, hashed_names: bool) -> None:
    """lines host entries ([name]:2222, hashed or not), a key each from keys, plus a CA and a revoked line."""
    rows = [f"@cert-authority *.other.example {keys[0]}", f"@revoked *.example {keys[1]}"]
    for index in range(lines - 2):
        host = f"[{name(index)}]:{PORT}"
        rows.append(f"{hashed(host) if hashed_names else host} {keys[2 + index % (len(keys) - 2)]}")
    path.write_text("\n".join(rows) + "\n")


def median_s(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def decision_figures(path: Path, lines: int, hosts: int, keys: list[asyncssh.SSHKey], repeats: int) -> dict[str, float]:
    """Seconds: proofbot cold (file parsed) and warm (cached) for one host and for hosts; asyncssh the same."""
    picked = [(index * (lines - 2)) // hosts for index in range(hosts)]

    def proofbot(indexes: list[int], cold: bool) -> None:
        if cold:
            known_hosts_file._CACHE.clear()
        for index in indexes:
            trust = trust_for(lookup_for(name(index), PORT, None), [str(path)], [])
            blob = bytes(keys[2 + index % (len(keys) - 2)].public_data)
            assert decide(trust, blob, time.time()).accepted

    def peer(indexes: list[int], imported: bool = False) -> None:
        known: object = asyncssh.import_known_hosts(path.read_text()) if imported else str(path)
        for index in indexes:
            trusted, *_ = asyncssh.match_known_hosts(known, name(index), "10.0.0.1", PORT)  # type: ignore[arg-type]
            assert trusted

    one = picked[len(picked) // 2:len(picked) // 2 + 1]
    return {
        "proofbot_one_cold": median_s(lambda: proofbot(one, True), repeats),
        "proofbot_one_warm": median_s(lambda: proofbot(one, False), repeats),
        "proofbot_many": median_s(lambda: proofbot(picked, True), max(1, repeats // 2)),
        "asyncssh_one": median_s(lambda: peer(one), repeats),
        "asyncssh_many": median_s(lambda: peer(picked), 1),
        "asyncssh_many_imported": median_s(lambda: peer(picked, imported=True), 1),
    }


async def verify_s(big: Path | None, repeats: int, work: Path) -> float:
    """Median wall time of one tier-1 verify (the loopback host), its known_hosts alone or after big's lines."""
    async with demo_host("ct130", patched=False, extra_file=False,
                         flags=["--speculative-algorithm", "NEXTN"]) as host:
        document = host.inventory()
        known = work / f"verify_known_hosts_{'big' if big else 'small'}"
        known.write_bytes((big.read_bytes() if big else b"") + host.known_hosts.read_bytes())  # noqa: ASYNC240
        document["ssh"]["known_hosts"] = str(known)
        inventory = parse_inventory(yaml.safe_dump(document), "bench.yml")
        times = []
        for attempt in range(repeats + 1):
            known_hosts_file._CACHE.clear()  # every verify reads the file, as a fresh CLI process would
            audit = AuditStore.open(work / f"a{attempt}{'big' if big else ''}.db")
            try:
                started = time.perf_counter()
                result = await verify(VerifyPlan.for_host(inventory.host(host.name), None),
                                      origin=Origin("bench", "cli"), audit=audit)
                elapsed = time.perf_counter() - started
            finally:
                audit.close()
            assert result.verdict == "pass", [f.summary for f in result.checks if f.status != "pass"]
            if attempt:  # the first warms imports and caches
                times.append(elapsed)
        return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    keys = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(50)]
    lines_of = [" ".join(key.export_public_key().decode().split()[:2]) for key in keys]
    with tempfile.TemporaryDirectory(prefix="known-hosts-bench-") as directory:
        work = Path(directory)
        print(f"host-key decision, {args.lines:,}-line known_hosts, median of {args.repeats} "
              f"(500 hosts: of {max(1, args.repeats // 2)})")
        print(f"| file | proofbot 1 host (parse + decide) | 1 host (cached) | {args.hosts} hosts "
              f"| asyncssh match_known_hosts 1 host | {args.hosts} hosts | {args.hosts} hosts, file imported once "
              f"| ratio, {args.hosts} hosts |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for kind in ("plain", "hashed"):
            path = work / f"known_hosts_{kind}"
            write_file(path, args.lines, lines_of, hashed_names=kind == "hashed")
            figures = decision_figures(path, args.lines, args.hosts, keys, args.repeats)
            ratio = figures["asyncssh_many"] / figures["proofbot_many"]
            print(f"| {kind} | {figures['proofbot_one_cold'] * 1000:.1f} ms "
                  f"| {figures['proofbot_one_warm'] * 1000:.2f} ms | {figures['proofbot_many']:.2f} s "
                  f"| {figures['asyncssh_one'] * 1000:.1f} ms | {figures['asyncssh_many']:.2f} s "
                  f"| {figures['asyncssh_many_imported']:.2f} s | {ratio:.1f}x faster |")
        big = work / "known_hosts_hashed"
        small_s = asyncio.run(verify_s(None, args.repeats, work))
        big_s = asyncio.run(verify_s(big, args.repeats, work))
        print(f"\ntier-1 verify (one host, median of {args.repeats}): {small_s * 1000:.0f} ms with a one-line "
              f"known_hosts, {big_s * 1000:.0f} ms after {args.lines:,} hashed lines "
              f"({(big_s - small_s) * 1000:+.0f} ms)")


if __name__ == "__main__":
    main()
