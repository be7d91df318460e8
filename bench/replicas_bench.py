"""Benchmark: 50 concurrent ``/verify`` spread over two ``serve`` replicas on one PostgreSQL, the same 50 against
one replica, and the same 50 run by one process directly (the floor), side by side in one run on one lab.

Root, or a user who may run PostgreSQL (or ``--pg URL``): a private PostgreSQL 15 with its default durability
(fsync on, tests/lab/postgres.py). The lab host (bot/demo: an in-process asyncssh server, supervisord and the
stand-in service) runs in a child process; it is named N times in the inventory (h01…), so the N verifies are N
different operations, as N people verifying N hosts are. Each slash command is signed and POSTed as Slack sends it
(tests/slack_fake), from N users, all at once; each replica is a real ``proofbot serve --http`` process.
Run: sudo .venv/bin/python -m bench.replicas_bench [--verifies 50] [--repeats 2] [--channels 1] [--slack-limits]
    [--replicas both|1|2] [--pg URL]

Figures per round: every ack's time (Slack's limit is 3 s), and the time from the first request sent to the
last verdict shown (the parent message's edit to "hNN verify: …"); each verdict must be shown exactly once.
The inventory raises ``limits.total`` to N (the default, 16 in flight per replica, would refuse the rest) and
keeps every other default (``ssh.max_connections`` 32 per process). The fake takes every Web API call, so the figures
are proofbot's; ``--slack-limits`` applies Slack's documented rate limits (chat.postMessage ~1 a second per channel,
chat.update 50 a minute per app) to the measured rounds (the warm-up takes every call), and each round then also
prints when the verdicts reached their parents (first, median, the Nth) and when the last evidence reply was posted:
in one channel Slack's pace, about a message a second, sets the second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROUND_TIMEOUT_S = 600
SETTLE_TIMEOUT_S = 60
LIMITED_TIMEOUT_S = 1500  # under Slack's limits: ~11 messages a verify at ~1 a second in one channel
HOST_START_TIMEOUT_S = 120


async def serve_host() -> None:
    """Child: the lab host; prints its inventory as JSON, runs until stdin closes."""
    from bot.demo.host import demo_host

    async with demo_host("ct130", patched=False, extra_file=False, flags=["--speculative-algorithm", "NEXTN"]) as lab:
        print(json.dumps(lab.inventory()), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def bench_inventory(lab: dict[str, Any], verifies: int) -> dict[str, Any]:
    """The lab host named ``verifies`` times (h01, h02…); room for every verify in flight (limits.total)."""
    document = copy.deepcopy(lab)
    (entry,) = document["hosts"].values()
    document["hosts"] = {host_name(i): copy.deepcopy(entry) for i in range(verifies)}
    document["limits"] = {"total": max(verifies, 16)}
    for demo_only in ("connect_timeout_s", "command_timeout_s"):  # the demo's short bounds; proofbot's defaults here
        document["ssh"].pop(demo_only, None)
    return document


def host_name(i: int) -> str:
    return f"h{i + 1:02d}"


def cpu_s(pid: int) -> float:
    """A process's user + system CPU-seconds so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Round:
    """One round's figures: acks (s), the total (s), verdicts shown per host, refusals, each replica's CPU."""

    label: str
    acks: list[float]
    total_s: float
    verdicts: dict[str, int]
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    verdict_at: list[float] = field(default_factory=list)  # each verdict's edit of its parent, s from the start
    last_reply_s: float = 0.0  # the last evidence reply posted in any of the round's threads, s from the start

    def line(self) -> str:
        acks = f"slowest ack {max(self.acks) * 1000:6.0f} ms, p50 {statistics.median(self.acks) * 1000:5.0f} ms, " \
            if self.acks else ""
        twice = sum(1 for n in self.verdicts.values() if n > 1)
        cpu = ", replica CPU " + " / ".join(f"{c:.1f} s" for c in self.cpu) if self.cpu else ""
        return (f"  {self.label:<14} {acks}total {self.total_s:6.2f} s, verdicts {len(self.verdicts)}"
                f" (shown twice: {twice}, not pass: {len(self.failed)}, refused: {len(self.refused)}){cpu}"
                f"{self.pace()}")

    def pace(self) -> str:
        """When the verdicts reached their parents and the last reply its thread (Slack's pace, with its limits)."""
        if not self.verdict_at:
            return ""
        at = sorted(self.verdict_at)
        return (f"\n    verdicts on their parents: first {at[0]:.1f} s, median {statistics.median(at):.1f} s, "
                f"#{len(at)} {at[-1]:.1f} s; last evidence reply {self.last_reply_s:.1f} s")


async def slack_round(slack: Any, replicas: Sequence[Any], hosts: list[str], channels: list[str],
                      label: str, timeout_s: float = ROUND_TIMEOUT_S) -> Round:
    """Every host's /verify at once, request i to replica i mod R, in channel i mod C; until every verdict shows."""
    from tests.slack_fake.signing import slash_command_body

    seen = {m.ts for c in channels for m in slack.messages_in(c)}
    bodies = [slash_command_body("/verify", host, f"U{i:07d}", channels[i % len(channels)], slack.response_url(),
                                 slack.trigger_id(f"U{i:07d}")) for i, host in enumerate(hosts)]
    urls = [f"http://127.0.0.1:{replicas[i % len(replicas)].port}/slack/events" for i in range(len(hosts))]
    cpu_before = [cpu_s(r.pid) for r in replicas]
    started = time.monotonic()
    acks = await asyncio.gather(*(slack.deliver(url, body) for url, body in zip(urls, bodies, strict=True)))
    refused = [f"{host}: HTTP {ack.status_code} {ack.text[:200]}" for host, ack in zip(hosts, acks, strict=True)
               if ack.status_code != 200 or ack.text.strip()]

    parents: set[str] = set()

    def verdicts() -> dict[str, list[tuple[float, str]]]:
        shown: dict[str, list[tuple[float, str]]] = {}
        for channel in channels:
            for m in slack.messages_in(channel):
                if m.ts in seen or m.is_reply:
                    continue
                for edit in m.edits:  # the parent is posted as progress; its verdict is an edit
                    host = edit.text.split(" ", 1)[0]
                    if edit.text.startswith(f"{host} verify: ") and host in hosts:
                        why = [r.text for r in slack.thread(channel, m.ts) if ": pass" not in r.text][:1]
                        shown.setdefault(host, []).append((edit.at, " ".join([edit.text, *why])[:300]))
                        parents.add(m.ts)
                        break
        return shown

    wanted = len(hosts) - len(refused)
    await slack.wait_until(lambda: len(verdicts()) >= wanted, timeout=timeout_s, what=f"{wanted} verdicts")
    shown = verdicts()
    total = max(at for found in shown.values() for at, _ in found) - started
    await settled(slack, parents, SETTLE_TIMEOUT_S if timeout_s == ROUND_TIMEOUT_S else timeout_s)
    replies = [m.posted_at for c in channels for ts in parents for m in slack.thread(c, ts)
               if not m.text.startswith("Summary")]
    failed = [found[0][1] for found in shown.values() if not found[0][1].split(": ", 1)[1].startswith("PASS")]
    return Round(label, [a.elapsed for a in acks], total, {h: len(v) for h, v in shown.items()}, refused, failed,
                 [cpu_s(r.pid) - b for r, b in zip(replicas, cpu_before, strict=True)],
                 [found[0][0] - started for found in shown.values()], max(replies, default=started) - started)


async def settled(slack: Any, parents: set[str], timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Until every thread's last post (its details file, after the summary): a verify holds its place among the
    operations in flight until then, and the next round's same request would be refused as already running."""
    def done() -> set[str]:
        return {str(c.args.get("thread_ts")) for c in slack.calls_to("files.completeUploadExternal")}
    try:
        await slack.wait_until(lambda: parents <= done(), timeout=timeout_s, what="every thread's last post")
    except TimeoutError:
        print(f"  ({len(parents - done())} threads had no details file after {timeout_s} s)", flush=True)


async def floor_round(plans: list[Any], audit: Any) -> Round:
    """The same verifies run by this process directly (inside warm_connections, as serve runs them): no Slack."""
    from commands.operation import Origin
    from commands.verify import verify

    cpu, started = time.process_time(), time.monotonic()
    results = await asyncio.gather(*(verify(plan, origin=Origin.local_user(), audit=audit) for plan in plans))
    total = time.monotonic() - started
    return Round("one process", [], total, {r.host: 1 for r in results},
                 failed=[f"{r.host}: {r.verdict}" for r in results if r.verdict != "pass"],
                 cpu=[time.process_time() - cpu])


def summary(rounds: dict[str, list[Round]], verifies: int) -> None:
    """Medians over the repeats, and the ratios two/one and each against the floor."""
    def med(label: str, pick: Callable[[Round], float]) -> float:
        return statistics.median(pick(r) for r in rounds[label])

    print(f"\n| {verifies} concurrent /verify | slowest ack | p50 ack | total (median) | min - max | x one process |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    floor = med("one process", lambda r: r.total_s)
    for label in [label for label in ("two replicas", "one replica", "one process") if rounds[label]]:
        totals = [r.total_s for r in rounds[label]]
        acks = [a for r in rounds[label] for a in r.acks]
        ack_cells = (f"{max(acks) * 1000:.0f} ms | {statistics.median(acks) * 1000:.0f} ms" if acks else "- | -")
        print(f"| {label} | {ack_cells} | {statistics.median(totals):.2f} s | {min(totals):.2f} - {max(totals):.2f} s"
              f" | {statistics.median(totals) / floor:.2f}x |")
    if rounds["two replicas"] and rounds["one replica"]:
        two, one = med("two replicas", lambda r: r.total_s), med("one replica", lambda r: r.total_s)
        print(f"\ntwo replicas / one replica: {two / one:.2f}x; two replicas / one process: {two / floor:.2f}x; "
              f"one replica / one process: {one / floor:.2f}x")
    single = rounds.get("one /verify")
    if single:
        print(f"one /verify alone through a replica: {statistics.median(r.total_s for r in single):.2f} s "
              f"(ack {statistics.median(a for r in single for a in r.acks) * 1000:.0f} ms)")
    slow = [a for label in ("two replicas", "one replica") for r in rounds[label] for a in r.acks if a > 3.0]
    print(f"acks over Slack's 3 s: {len(slow)}")


def problems(rounds: dict[str, list[Round]]) -> list[str]:
    """What a user would call wrong: a refusal, a verdict not shown or shown twice, a verify that did not pass."""
    found = []
    for label, done in rounds.items():
        for r in done:
            found += [f"{label}: refused {x}" for x in r.refused] + [f"{label}: not pass {x}" for x in r.failed]
            found += [f"{label}: {h} shown {n} times" for h, n in r.verdicts.items() if n != 1]
    return found


async def bench(args: argparse.Namespace, lab: dict[str, Any], db: str, scratch: Path) -> dict[str, list[Round]]:
    from commands.inventory import parse_inventory
    from commands.ssh import warm_connections
    from commands.store.db import AuditStore
    from commands.verify import VerifyPlan
    from tests.conftest import write_inventory
    from tests.slack_fake.server import FakeSlack
    from tests.test_replicas import Replica
    from tests.test_serve_recovery import SECRET  # the one the replicas check signatures with

    document = bench_inventory(lab, args.verifies)
    inventory = write_inventory(scratch / "inventory.yml", document)
    hosts = list(document["hosts"])
    channels = [f"C0BENCH{c}" for c in range(args.channels)]
    rounds: dict[str, list[Round]] = {"two replicas": [], "one replica": [], "one process": [], "one /verify": []}
    async with FakeSlack(channels={c: c.lower() for c in channels}, signing_secret=SECRET) as slack:
        slack.rate_limits.enabled = False  # the warm-up takes every call; --slack-limits applies to the rounds
        timeout_s = LIMITED_TIMEOUT_S if args.slack_limits else ROUND_TIMEOUT_S
        measured = [(label, targets) for label, targets in (("two replicas", "2"), ("one replica", "1"))
                    if args.replicas in ("both", targets)]
        a, b = Replica(slack, inventory, db), Replica(slack, inventory, db)  # type: ignore[arg-type]
        try:
            await a.start()  # one after the other: the first applies the migrations
            await b.start()
            print(f"replicas up: A pid {a.pid}, B pid {b.pid}", flush=True)
            print("warm-up (not counted): every host once through each replica", flush=True)
            for replica in (a, b):
                print((await slack_round(slack, [replica], hosts, channels, "warm-up")).line(), flush=True)
            audit = await asyncio.to_thread(AuditStore.open, db)
            plans = [VerifyPlan.for_host(parse_inventory(yaml.safe_dump(document), "bench.yml").host(h), None)
                     for h in hosts]
            try:
                async with warm_connections():
                    print((await floor_round(plans, audit)).line().replace("one process", "warm-up"), flush=True)
                    slack.rate_limits.enabled = args.slack_limits
                    for n in range(args.repeats):
                        print(f"round {n + 1} of {args.repeats}", flush=True)
                        for label, which in measured:
                            targets = [a, b] if which == "2" else [a]
                            done = await slack_round(slack, targets, hosts, channels, label, timeout_s)
                            rounds[label].append(done)
                            print(done.line(), flush=True)
                        done = await floor_round(plans, audit)
                        rounds["one process"].append(done)
                        print(done.line(), flush=True)
                    done = await slack_round(slack, [a], hosts[:1], channels, "one /verify", timeout_s)
                    rounds["one /verify"].append(done)
                    print(done.line(), flush=True)
            finally:
                audit.close()
        finally:
            await a.stop()
            await b.stop()
        print(f"Slack Web API 429s answered by the fake: {sum(1 for c in slack.calls if c.http_status == 429)}")
        late = list(slack.warnings)  # acks past 3 s: reported among the figures, not raised by the fake on exit
        slack.warnings.clear()
    print(f"what Slack would not have taken: {len(late)}", *late[:10], sep="\n  ")
    return rounds


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verifies", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--channels", type=int, default=1, help="spread the requests over this many channels")
    parser.add_argument("--slack-limits", action="store_true",
                        help="the fake answers 429 past Slack's documented rate limits (default: it takes every call)")
    parser.add_argument("--replicas", choices=("both", "1", "2"), default="both",
                        help="measure two replicas, one, or both (default), each round")
    parser.add_argument("--pg", metavar="URL", help="a PostgreSQL database (default: a private cluster)")
    parser.add_argument("--serve-host", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_host:
        await serve_host()
        return 0
    from tests.lab.postgres import bench_cluster

    with contextlib.ExitStack() as stack:
        cluster = await asyncio.to_thread(stack.enter_context, bench_cluster(args.pg))
        child = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench.replicas_bench", "--serve-host",
                                                     stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert child.stdin is not None and child.stdout is not None
        try:
            lab = json.loads(await asyncio.wait_for(child.stdout.readline(), HOST_START_TIMEOUT_S))
            db = cluster.database("replicas_bench") if cluster else args.pg
            pg = "private cluster, fsync on" if cluster else "given URL"
            print(f"{args.verifies} concurrent /verify, signed as Slack sends them, from {args.verifies} users in "
                  f"{args.channels} channel(s); PostgreSQL 15 ({pg}); "
                  f"one loopback lab host named {args.verifies} times; Slack's rate limits "
                  f"{'on' if args.slack_limits else 'off'}", flush=True)
            with tempfile.TemporaryDirectory(prefix="proofbot-replicas-bench-") as scratch:
                rounds = await bench(args, lab, db, Path(scratch))
        finally:
            child.stdin.close()
            await asyncio.wait_for(child.wait(), 60)
    summary(rounds, args.verifies)
    wrong = problems(rounds)
    for problem in wrong[:20]:
        print(f"PROBLEM: {problem}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
