"""``proofbot demo``: the seed's story against a loopback lab host, told as the Slack thread reads.

No root, no Slack account: an in-process SSH server, a real supervisord and a demo
service laid out as ct129 was after the failed rollback (one file patched, one extra
file, a forbidden flag on the command line). verify must find all three.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bot.blocks import as_plain_text, finding_message, progress_message, verdict_message
from bot.demo_host import demo_host
from commands.audit_store import AuditStore, db_path
from commands.findings import Finding
from commands.inventory import Inventory, load_inventory
from commands.operation import Origin
from commands.verify import VerifyPlan, verify

DEMO_USER = "UDEMO"
EXPECTED_FAILURES = {"file:spec_info.py", "extra-files", "cmdline"}


def _say(text: str = "") -> None:
    print(text, flush=True)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _load_through_file(document: dict[str, Any]) -> Inventory:
    """Load the demo inventory the way a user's file is loaded: from YAML on disk."""
    handle, name = tempfile.mkstemp(prefix="proofbot-demo-", suffix=".yml")
    try:
        with os.fdopen(handle, "w") as out:
            yaml.safe_dump(document, out, sort_keys=False)
        return load_inventory(Path(name))
    finally:
        os.unlink(name)


async def run_demo(db: str | None = None) -> int:
    _say("proofbot demo: starting a lab host on loopback (in-process SSH server, real supervisord)…")
    async with demo_host() as lab:
        inventory = _load_through_file(lab.inventory())
        _say(f"  host ct129 = 127.0.0.1:{lab.ssh_port}, files under {lab.root}")
        _say("  state left by the seed: spec_info.py patched, ddtree_utils.py added, --enable-ddtree on the cmdline")
        _say()
        audit = AuditStore.open(db_path(db))
        try:
            plan = VerifyPlan.for_host(inventory.host("ct129"), None)
            planned = plan.check_names()
            _say("/verify ct129")
            _say(_indent(as_plain_text(progress_message("verify", "ct129", DEMO_USER, planned, [])), "  │ "))
            seen: list[Finding] = []

            async def show(finding: Finding) -> None:
                seen.append(finding)
                _say(_indent(as_plain_text(finding_message(finding)), "  ├─ "))

            result = await verify(plan, origin=Origin.local_user("demo"), audit=audit, on_finding=show)
        finally:
            audit.close()
        _say("  parent message, updated with the verdict:")
        _say(_indent(as_plain_text(verdict_message(result, DEMO_USER, plan.backup_name)), "  │ "))
        _say()
        failed = {finding.name for finding in result.checks if finding.status == "fail"}
        _say(f"audit log: {db_path(db)} (operation {result.operation_id}, "
             f"{result.stats.get('exec_round_trips')} exec round trips over "
             f"{result.stats.get('connections')} SSH connection)")
        if failed == EXPECTED_FAILURES and result.verdict == "fail":
            _say("demo: verify found every planted problem, with evidence. Lab host stopped and removed.")
            return 0
        _say(f"demo: expected failures {sorted(EXPECTED_FAILURES)}, got {sorted(failed)}: the demo itself is broken")
        return 1
