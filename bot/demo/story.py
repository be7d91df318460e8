"""``proofbot demo``: the seed's story against a loopback lab host, told as the Slack thread reads.

No root, no Slack account: an in-process SSH server, a real supervisord and a demo
service laid out as ct129 was after the failed rollback (one file patched, one extra
file, a forbidden flag on the command line), and an installed distribution (sgl-kernel)
patched the same way with no backup at all. Act 1: verify finds all four. Act 2: a
restore is planned, approved and proved. Act 3: verify again shows what is left; the
operator follows what ``package:sgl-kernel`` said to make it pristine. Act 4:
a restart proves the flag is still there; the launch config is fixed; a restart and a
final verify prove every signal green.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bot.demo.host import DIST, demo_host, supervisord_available
from bot.restart_text import progress_line
from bot.slack.blocks import Message, as_plain_text
from bot.slack.restart_blocks import restart_now_message, restart_plan_message
from bot.slack.restore_blocks import restore_plan_message
from bot.slack.thread_blocks import details_file, finding_message, progress_message, verdict_message
from bot.typed_command import command_line, given_options
from bot.words import runs_old_code
from commands.errors import UsageError
from commands.findings import Finding
from commands.inventory import Inventory, load_inventory
from commands.operation import OperationResult, Origin
from commands.plans import Plan
from commands.restart import RestartProgress, apply_restart, request_restart
from commands.restore import apply_restore, request_restore
from commands.store import approvals
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from commands.vocabulary import CheckStatus, Operation, PlanState, Verdict

REQUESTER = "UDEMO"
APPROVER = "UAPPROVER"
REQUESTED = Origin(actor=f"slack:{REQUESTER}", via="demo")
GOOD_FLAGS = ["--speculative-algorithm", "NEXTN"]
FIRST_FAILURES = {"file:spec_info.py", "extra-files", "cmdline", f"package:{DIST}"}
AFTER_RESTORE_FAILURES = {"cmdline", f"package:{DIST}"}


def _say(text: str = "") -> None:
    print(text, flush=True)


def _show(message: Message, prefix: str) -> None:
    _say("\n".join(prefix + line for line in as_plain_text(message).splitlines()))


def _load_through_file(document: dict[str, Any], path: Path) -> Inventory:
    """Load the demo inventory the way a user's file is loaded: from YAML on disk (written whole
    to a temp name, then renamed, so a reader never sees half a file)."""
    handle, name = tempfile.mkstemp(prefix=".proofbot-demo-", suffix=".yml", dir=path.parent)
    with os.fdopen(handle, "w") as out:
        yaml.safe_dump(document, out, sort_keys=False)
    os.replace(name, path)
    return load_inventory(path)


async def _until_stopped() -> None:
    """Wait for Ctrl-C or SIGTERM, then return normally so the lab host is stopped and removed."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


async def _verify_act(inventory: Inventory, audit: AuditStore) -> OperationResult:
    plan = VerifyPlan.for_host(inventory.host("ct129"), None)
    _say("/verify ct129")
    _show(progress_message(Operation.VERIFY, "ct129", REQUESTER, plan.check_names(), []), "  │ ")

    result = await verify(plan, origin=REQUESTED, audit=audit, on_finding=_show_finding)
    _say("  parent message, updated with the verdict:")
    _show(verdict_message(result, REQUESTER, plan.backup_name), "  │ ")
    _show_details(result)
    if runs_old_code(result):
        _show(restart_now_message("ct129", result.operation_id), "  └─ ")
    _say()
    return result


async def _restore_act(inventory: Inventory, audit: AuditStore) -> OperationResult:
    _say("/restore ct129")
    plan = await request_restore(inventory, inventory.host("ct129"), origin=REQUESTED, audit=audit)
    _show(restore_plan_message(plan, REQUESTER, *await _approval_terms(inventory, audit, plan)), "  │ ")
    for change in plan.changes:
        _say("  ├─ diff of " + change.name)
        _say("\n".join("  ├─   " + line for line in change.diff.splitlines()))
    _say(f"  <@{APPROVER}> clicks [Approve + move extras], and confirms \"Restore + move\"")
    decided = await _approve(inventory, audit, plan.operation_id)
    result = await apply_restore(plan, decided, actor=f"slack:{APPROVER}", audit=audit, move_extras=True,
                                 on_step=_show_finding)
    _say("  parent message, updated with the verdict:")
    _show(verdict_message(result, REQUESTER, plan.source.name), "  │ ")
    _show_details(result)
    _say(f"  snapshot kept at {result.extra['snapshot_dir']}")
    _say()
    return result


async def _restart_act(inventory: Inventory, audit: AuditStore) -> OperationResult:
    _say("/restart ct129")
    plan = await request_restart(inventory, inventory.host("ct129"), origin=REQUESTED, audit=audit)
    _show(restart_plan_message(plan, REQUESTER, *await _approval_terms(inventory, audit, plan)), "  │ ")
    _say(f"  <@{APPROVER}> clicks [Approve], and confirms \"Restart\"")
    decided = await _approve(inventory, audit, plan.operation_id)
    last_line = ""

    async def progress(state: RestartProgress) -> None:
        nonlocal last_line
        line = progress_line(state)
        if line.split(" · ", 1)[1:] != last_line.split(" · ", 1)[1:]:
            _say(f"  │ … {line}")
        last_line = line

    result = await apply_restart(plan, decided, origin=Origin(actor=f"slack:{APPROVER}", via="demo"), audit=audit,
                                 on_progress=progress, on_finding=_show_finding)
    _say("  parent message, updated with the verdict:")
    _show(verdict_message(result, REQUESTER, None), "  │ ")
    _show_details(result)
    _say()
    return result


async def _approval_terms(inventory: Inventory, audit: AuditStore, plan: Plan) -> tuple[str, list[str]]:
    """When the plan expires and who may approve it, as the plan message shows them."""
    pending = await approvals.get(audit, plan.operation_id)
    return pending.expires_at_utc(), inventory.approvals.approvers


async def _approve(inventory: Inventory, audit: AuditStore, plan_id: str) -> approvals.PendingPlan:
    return await approvals.decide(audit, plan_id, f"slack:{APPROVER}", PlanState.APPROVED, inventory.approvals,
                                  user_id=APPROVER)


def _show_details(result: OperationResult) -> None:
    """The thread's details file, as Slack lists it: its name and how much it holds (not its text)."""
    details = details_file(result.checks)
    if details is not None:
        cut = details.count("\n--- ") + 1
        _say(f"  ├─ [file] details-{result.operation_id}.txt: the whole command and output of the "
             f"{cut} check{'s' if cut != 1 else ''} cut above ({len(details.encode())} bytes)")


async def _show_finding(finding: Finding) -> None:
    _show(finding_message(finding), "  ├─ ")


def _failures(result: OperationResult) -> set[str]:
    return {finding.name for finding in result.checks if finding.status == CheckStatus.FAIL}


async def run_demo(db_file: Path, *, keep: bool = False) -> int:
    """The story; ``keep`` leaves the lab host up (until Ctrl-C) with its inventory beside ``db_file``
    (an absolute path: the commands printed at the end must work from any directory)."""
    inventory_file = db_file.with_name(db_file.stem + ".inventory.yml")
    if not supervisord_available():
        raise UsageError("the demo runs a real supervisord, and none is installed",
                         hint="pip install 'proofbot[demo]' (scripts/setup does)")
    _say("proofbot demo: starting a lab host on loopback (in-process SSH server, real supervisord)…")
    async with demo_host(packages=True) as lab:
        document = lab.inventory()
        document["approvals"]["approvers"] = [APPROVER]
        inventory = _load_through_file(document, inventory_file)
        _say(f"  host ct129 = 127.0.0.1:{lab.ssh_port}, files under {lab.root}")
        _say("  state left by the seed: spec_info.py patched, ddtree_utils.py added, --enable-ddtree on the cmdline;")
        _say(f"  and the installed {DIST} (pip, RECORD intact) patched the same way, with no backup configured")
        _say()
        audit = AuditStore.open(db_file)
        try:
            first = await _verify_act(inventory, audit)
            restored = await _restore_act(inventory, audit)
            again = await _verify_act(inventory, audit)
            _say(f"The operator does what package:{DIST} said: moves the unlisted module aside and force-reinstalls")
            _say(f"{DIST} (offline here: from its source tree, where the finding's command would use the index):")
            _say("  " + (await lab.reinstall_dist()).strip().splitlines()[-1])
            _say()
            still_flagged = await _restart_act(inventory, audit)
            _say("The operator removes --enable-ddtree from the launch config (supervisord.conf), then runs")
            _say("`supervisorctl reread && supervisorctl update sglang`:")
            _say("\n".join("  " + line for line in (await lab.change_launch_flags(GOOD_FLAGS)).splitlines()))
            _say()
            fixed = await _restart_act(inventory, audit)
            final = await _verify_act(inventory, audit)
        finally:
            audit.close()
        operations = [first, restored, again, still_flagged, fixed, final]
        held = _tell_the_story(first, restored, again, still_flagged, fixed, final)
        _say(f"audit log: {db_file} ({len(operations)} operations: "
             f"{', '.join(op.operation_id for op in operations)}; each verify used "
             f"{first.stats.get('exec_round_trips')} exec round trips over {first.stats.get('connections')} SSH "
             "connection)")
        where = given_options(str(inventory_file), str(db_file))
        if keep:
            _say("The lab host stays up until Ctrl-C. Try, in another terminal:")
            _say(f"  {command_line(Operation.VERIFY, 'ct129', given=where)}")
            _say(f"  {command_line(Operation.AUDIT, 'ct129', given=where)}")
            await _until_stopped()
        else:
            os.unlink(inventory_file)  # it names a lab host that is about to be removed
            _say(f"Explore the log: {command_line(Operation.AUDIT, given=given_options(None, str(db_file)))}   ·   "
                 f"`{command_line('demo', '--keep', given=())}` leaves the lab host up to verify it yourself")
    if held:
        _say("demo: the story played out, every step with its evidence. Lab host stopped and removed.")
        return 0
    _say("demo: the story did not play out as it should: the demo itself is broken")
    return 1


def _tell_the_story(first: OperationResult, restored: OperationResult, again: OperationResult,
                    still_flagged: OperationResult, fixed: OperationResult, final: OperationResult) -> bool:
    """Say which turns of the story held; True when all did."""
    package = next(f for f in first.checks if f.name == f"package:{DIST}")
    story = [("verify found the patched file, the extra file and the forbidden flag",
              _failures(first) == FIRST_FAILURES),
             (f"with no backup, package:{DIST} named its edited and its added module from RECORD alone",
              {item["path"] for item in package.details["changed"] + package.details["unlisted"]}
              == {"sgl_kernel/speculative.py", "sgl_kernel/ddtree_kernels.py"}),
             ("restore replaced spec_info.py and moved ddtree_utils.py aside, proved by re-reading",
              restored.verdict == Verdict.PASS and restored.extra["restored"] == ["spec_info.py"]),
             (f"verify again: files match the backup; the running process still has --enable-ddtree; {DIST} "
              "still patched (no backup knew it)", _failures(again) == AFTER_RESTORE_FAILURES),
             ("restart: new PID and health 200, but the forbidden flag came back: FAIL, said plainly",
              still_flagged.verdict == Verdict.FAIL and _failures(still_flagged) >= {"cmdline"}
              and still_flagged.extra["new_pid"] != still_flagged.extra["old_pid"]),
             ("launch config fixed, restart: new PID, health, flags and one real request all green",
              fixed.verdict == Verdict.PASS),
             ("final verify: every check passes", final.verdict == Verdict.PASS and not _failures(final))]
    for line, held in story:
        _say(f"  {'✓' if held else '✗'} {line}")
    return all(held for _, held in story)
