"""Plan a restore of a big file that differs everywhere, while Slack asks for /verify (tier 1, no root).

Prints the plan's wall time, the process's peak RSS (``resource.getrusage``: the bot and the
loopback SSH server share this process, so every byte the host sends is counted once), the
size of the diff as the host counted it and as it was shown, and the ack times of ``/verify``
commands delivered by the fake Slack every second while the plan runs, as a share of Slack's
3 s deadline.

    .venv/bin/python -m bench.big_file_bench [--size-mb 100] [--code DIR]

``--code DIR`` runs the same bench against another checkout's ``commands``/``bot`` (e.g. a
``git worktree`` of an older commit) in a fresh process, for a before/after figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml
from aiohttp import web

SLACK_DEADLINE_S = 3.0
CHANNEL = "C0BENCH"
SECRET = "bench-signing-secret"


def write_differing(path: Path, size_mb: int, tag: str) -> None:
    """Lines of ~100 bytes, each one different from the other file's: the diff is the whole of both."""
    line_count = size_mb * 1024 * 1024 // 100
    filler = "x" * 70
    with path.open("w") as out:
        for start in range(0, line_count, 10_000):
            out.write("".join(f"{tag} {i:010d} {filler}\n" for i in range(start, min(start + 10_000, line_count))))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def bench(size_mb: int) -> None:
    from bot.demo.host import demo_host
    from bot.slack.app import build_app
    from bot.slack.context import BotContext
    from commands.inventory import parse_inventory
    from commands.restore.plan import read_plan
    from commands.restore.source import backup_source
    from commands.ssh import connect
    from commands.store.db import AuditStore
    from tests.slack_fake.server import FakeSlack

    async with demo_host("ct150", patched=False, extra_file=False) as host:
        live, backup = host.live_dir / "spec_info.py", host.backup_dir / "spec_info.py"
        write_differing(live, size_mb, "live")
        write_differing(backup, size_mb, "backup")
        document = host.inventory()
        document["ssh"]["command_timeout_s"] = 600
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        target = inventory.host("ct150")
        with tempfile.TemporaryDirectory() as scratch:
            audit = AuditStore.open(Path(scratch) / "audit.db")
            async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
                app = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, signing_secret=SECRET,
                                api_url=slack.api_url)
                runner = web.AppRunner(app.web_app(path="/slack/events"))
                await runner.setup()
                await web.TCPSite(runner, "127.0.0.1", 0).start()
                url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
                rss_before = peak_rss_mb()

                async def plan_it() -> tuple[float, object]:
                    started = time.monotonic()
                    async with connect(target) as conn:
                        plan = await read_plan(conn, "op-bench", backup_source(target, None))
                    return time.monotonic() - started, plan

                planning = asyncio.create_task(plan_it())
                # Slack is another machine: its requests come from a thread of their own, so a
                # blocked event loop shows up as a slow ack instead of as no request at all.
                acks: list[float] = []
                stop = threading.Event()
                sender = threading.Thread(target=_send_verifies, args=(url, slack.response_url(), stop, acks))
                sender.start()
                try:
                    wall, plan = await planning
                finally:
                    stop.set()
                    await asyncio.to_thread(sender.join)
                rss_after = peak_rss_mb()
                # each acked /verify really runs: let them end before the host goes away
                await _settled(slack, len(acks))
                await runner.cleanup()
            audit.close()
    [state] = [f for f in plan.files if f.name == "spec_info.py"]  # type: ignore[attr-defined]
    shown = len(state.diff.encode())
    counted = getattr(state, "diff_bytes", None)
    print(f"file size            {live_size(size_mb)} (live and backup differ on every line)")
    print(f"plan wall time       {wall:.2f} s")
    print(f"peak RSS             {rss_before:.0f} MB before the plan, {rss_after:.0f} MB after")
    print(f"diff                 {shown:,} bytes shown; full size as counted on the host: "
          f"{'not counted (old code)' if counted is None else f'{counted:,} bytes'}")
    if acks:
        worst = max(acks)
        print(f"/verify acks         {len(acks)} sent during the plan; slowest {worst * 1000:.0f} ms "
              f"= {worst / SLACK_DEADLINE_S:.1%} of Slack's 3 s deadline; all: "
              + ", ".join(f"{a * 1000:.0f}" for a in acks) + " ms")
    else:
        print("/verify acks         none sent: the plan finished within 1 s")


def _send_verifies(url: str, response_url: str, stop: threading.Event, acks: list[float]) -> None:
    from tests.slack_fake.signing import sign, slash_command_body

    while not stop.wait(1.0):
        body = slash_command_body("/verify", "ct150", "U0BENCH", CHANNEL, response_url, "t")
        request = urllib.request.Request(url, data=body, headers={
            "Content-Type": "application/x-www-form-urlencoded", **sign(body, SECRET)})
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
        acks.append(time.monotonic() - started)


async def _settled(slack: object, verifies: int, quiet_s: float = 2.0, deadline_s: float = 600) -> None:
    """Until every /verify posted its verdict and Slack heard nothing new for ``quiet_s``."""
    calls = slack.calls  # type: ignore[attr-defined]
    deadline = time.monotonic() + deadline_s
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if len(calls) != seen:
            seen, quiet_since = len(calls), time.monotonic()
        elif _verdicts(slack) >= verifies and time.monotonic() - quiet_since >= quiet_s:
            return
        await asyncio.sleep(0.2)


def _verdicts(slack: object) -> int:
    messages = slack.messages_in(CHANNEL)  # type: ignore[attr-defined]
    return sum(1 for m in messages if "ct150 verify:" in (m.edits[-1].text if m.edits else m.text))


def live_size(size_mb: int) -> str:
    return f"{size_mb} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--code", help="another checkout whose commands/bot to bench, in a fresh process")
    args = parser.parse_args()
    if args.code:
        here = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(args.code).resolve()), str(here)])}
        print(f"code under test: {Path(args.code).resolve()}", flush=True)
        raise SystemExit(subprocess.run([sys.executable, str(Path(__file__).resolve()), "--size-mb",
                                         str(args.size_mb)], env=env, check=False).returncode)
    asyncio.run(bench(args.size_mb))


if __name__ == "__main__":
    main()
