"""Less noise where it matters: the Slack parent puts what went wrong first and does not paint a pass with
warnings plain green; plan expiry is a Slack date (each reader's own time zone); the CLI says why --strict
exited 1 and what a restore left to do (move the extras, restart onto the restored code)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from bot.cli.results_text import restore_hints, strict_reason
from bot.demo.host import demo_host
from bot.slack.blocks import approval_footer
from bot.slack.thread_blocks import verdict_message
from commands.findings import Evidence, Finding
from commands.operation import OperationResult
from commands.plans import Decidable
from tests.conftest import run_cli, write_inventory

EVIDENCE = Evidence.of("true", 0, "", 0.0)


def result(operation: str, *checks: tuple[str, str]) -> OperationResult:
    return OperationResult("op-1", operation, "ct1", "2026-12-01T10:00:00Z", 1.0,
                           [Finding(name, status, f"{name} is {status}", EVIDENCE) for name, status in checks])


def parent_lines(message: tuple[str, list[dict[str, Any]]]) -> tuple[str, list[str]]:
    _, blocks = message
    return blocks[0]["text"]["text"], blocks[1]["text"]["text"].splitlines()


def test_the_slack_parent_lists_what_went_wrong_first_in_the_plans_order_otherwise() -> None:
    done = result("verify", ("file:a", "pass"), ("main-pid", "pass"), ("health", "error"), ("stale-process", "warn"),
                  ("cmdline", "fail"), ("file:b", "fail"))
    _, lines = parent_lines(verdict_message(done, "U1", None))
    assert [line.split("`")[1] for line in lines] == ["cmdline", "file:b", "health", "stale-process", "file:a",
                                                      "main-pid"]


def test_a_pass_with_a_warning_is_not_painted_plain_green() -> None:
    stale = result("restore", ("file:a", "pass"), ("stale-process", "warn"))
    clean = result("restore", ("file:a", "pass"))
    warned_head, clean_head = parent_lines(verdict_message(stale, "U1", "b"))[0], parent_lines(
        verdict_message(clean, "U1", "b"))[0]
    assert ":large_green_circle:" not in warned_head and "PASS, 1 warning*" in warned_head
    assert warned_head.startswith(":large_orange_circle: ")
    assert clean_head.startswith(":large_green_circle: *ct1 restore: PASS*")
    assert verdict_message(stale, "U1", "b")[0].startswith("ct1 restore: PASS, 1 warning")


@dataclass(frozen=True)
class _Plan:
    plan_hash: str = "ab" * 32
    operation_id: str = "op-1"


def test_plan_expiry_is_a_slack_date_with_the_utc_time_as_fallback() -> None:
    expires = "2026-12-01T10:15:00Z"
    epoch = int(datetime(2026, 12, 1, 10, 15, tzinfo=UTC).timestamp())
    context = approval_footer(cast(Decidable, _Plan()), expires, ["UAPPROVER"])[0]
    text = context.to_dict()["elements"][0]["text"]
    assert f"expires <!date^{epoch}^{{date_short_pretty}} {{time_secs}}|2026-12-01 10:15:00Z>" in text


def test_strict_says_which_warnings_made_it_exit_1() -> None:
    assert strict_reason(result("verify", ("a", "pass"), ("stale-process", "warn"), ("extra-files", "warn"))) == (
        "--strict: exit 1: the verdict is PASS, but 2 checks warned (stale-process, extra-files)")
    assert strict_reason(result("verify", ("a", "pass"))) is None
    assert strict_reason(result("verify", ("a", "fail"), ("b", "warn"))) is None  # a fail exits 1 anyway


def test_a_restore_with_nothing_left_to_do_hints_nothing() -> None:
    assert restore_hints(result("restore", ("file:a", "pass")), restart=["r"], undo=["u"], again=["a"]) == []


async def test_a_restore_that_left_extras_and_old_code_says_what_to_run_and_it_runs(tmp_path: Path) -> None:
    async with demo_host("ct136") as host:  # patched, with an extra file, the service started before the restore
        inventory = write_inventory(tmp_path / "inv.yml", host.inventory())
        where = ["--inventory", str(inventory), "--db", str(tmp_path / "a.db")]
        run = await run_cli("restore", host.name, "--yes", *where)
        hints = [line for line in run.stdout.splitlines() if line.startswith("hint: ")]
        assert run.code == 0, run.stdout + run.stderr
        [extras, restart] = hints
        undo, move = (shlex.split(part) for part in extras.split("--move-extras: ", 1)[1].split(" && "))
        assert undo[:4] == ["proofbot", "restore", host.name, "--undo"] and move[-1] == "--move-extras"
        assert restart.startswith("hint: the service still runs the code it started with")
        printed = shlex.split(restart.rsplit(": ", 1)[1])
        assert printed == ["proofbot", "restart", host.name, *where]
        again = await run_cli(*printed[1:])  # as printed; no terminal, so it shows the plan and asks nothing
        assert again.code == 4 and f"Restart plan for {host.name}" in again.stdout, again.stderr
        before = {path.name for path in host.live_dir.iterdir()}
        for printed in (undo, move):  # as printed, with the --yes a terminal would have asked for
            done = await run_cli(*printed[1:], "--yes")
            assert done.code == 0, done.stdout + done.stderr
        assert len(before - {path.name for path in host.live_dir.iterdir()}) == 1, "the extra file was moved aside"
        assert "extra-files" in done.stdout and "moved 1 extra file(s)" in done.stdout
