"""Big outputs are cut on the host, not read whole: the restore diff (tier 1, a real sh, diff and dd).

Also: a URL's userinfo never travels in the Host header of a request sent through the host.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
import yaml
from aiohttp import web

from bot.demo.host import DemoHost, demo_host
from commands.host_http import fetch_via_host
from commands.inventory import Host, parse_inventory
from commands.restore.diff import DIFF_LIMIT, diff_argv, diff_text
from commands.restore.plan import read_plan
from commands.restore.source import backup_source
from commands.ssh import connect


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def lab() -> AsyncIterator[tuple[DemoHost, Host]]:
    async with demo_host("ct140", patched=False, extra_file=False) as host:
        inventory = parse_inventory(yaml.safe_dump(host.inventory()), "inventory.yml")
        yield host, inventory.host("ct140")


def numbered(path: Path, lines: int, tag: str) -> Path:
    path.write_text("".join(f"{tag} line {i:07d} of a file that differs everywhere\n" for i in range(lines)))
    return path


def local_diff_size(a: Path, b: Path) -> int:
    run = subprocess.run(["diff", "-u", "--label", str(a), "--label", str(b), "--", str(a), str(b)],
                         capture_output=True, check=False)
    return len(run.stdout)


async def test_a_big_diff_is_cut_on_the_host_with_its_exit_status_and_full_size(
        lab: tuple[DemoHost, Host], tmp_path: Path) -> None:
    host, inventory_host = lab
    a, b = numbered(host.root / "big-a.txt", 40_000, "old"), numbered(host.root / "big-b.txt", 40_000, "new")
    limit = 64_000
    async with connect(inventory_host) as conn:
        [big] = await conn.run_batch([diff_argv(str(a), str(b), limit)])
        [same] = await conn.run_batch([diff_argv(str(a), str(a), limit)])
        [missing] = await conn.run_batch([diff_argv(str(a), str(host.root / "nope"), limit)])
    full = local_diff_size(a, b)
    assert full > 10 * limit
    assert big.exit_status == 1  # diff's own status came through the pipe: "files differ"
    assert len(big.output) == limit + len(str(full - limit))  # only the cap crossed the link, then a count
    shown, total = diff_text(big, limit)
    assert total == full
    assert shown.startswith(f"--- {a}\n+++ {b}\n@@")
    body, note = shown.rsplit("… [", 1)
    assert body.endswith("\n") and "line" in body.splitlines()[-1]  # cut at a whole line
    assert note.startswith(f"diff cut on the host after {len(body.encode()):,} of {full:,} bytes")
    assert (same.exit_status, same.output) == (0, b"")
    assert missing.exit_status == 2 and b"No such file" in missing.output


async def test_a_small_diff_comes_whole(lab: tuple[DemoHost, Host]) -> None:
    host, inventory_host = lab
    a, b = numbered(host.root / "small-a.txt", 3, "old"), numbered(host.root / "small-b.txt", 3, "new")
    async with connect(inventory_host) as conn:
        [result] = await conn.run_batch([diff_argv(str(a), str(b))])
    shown, total = diff_text(result)
    assert result.exit_status == 1 and total == local_diff_size(a, b) == len(shown.encode())
    assert "cut on the host" not in shown


async def test_the_restore_plan_of_a_big_file_shows_a_cut_diff_and_the_full_size(
        lab: tuple[DemoHost, Host]) -> None:
    host, inventory_host = lab
    live = numbered(host.live_dir / "spec_info.py", 60_000, "live")
    backup = numbered(host.backup_dir / "spec_info.py", 60_000, "backup")
    async with connect(inventory_host) as conn:
        plan = await read_plan(conn, "op-test", backup_source(inventory_host, None))
    [state] = [f for f in plan.files if f.name == "spec_info.py"]
    assert state.state == "differs"
    assert state.diff_bytes == local_diff_size(live, backup)
    assert len(state.diff.encode()) < DIFF_LIMIT + 200
    assert "diff cut on the host" in state.diff


async def test_userinfo_is_never_sent_in_the_host_header(lab: tuple[DemoHost, Host]) -> None:
    _, inventory_host = lab
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Host", ""))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/health", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with connect(inventory_host) as conn:
            outcome = await fetch_via_host(conn, f"http://monitor:Hhost-pw-5151@127.0.0.1:{port}/health")
    finally:
        await runner.cleanup()
    assert outcome.status == 200
    assert seen == [f"127.0.0.1:{port}"]
