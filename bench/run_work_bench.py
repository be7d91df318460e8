"""The CPU a verify's run spends besides SSH, for a recorded fleet (issue 27): findings made, events written, output.

Fed a fleet's ``--json`` (``proofbot verify all --json > fleet.json``), it does what the run of that ``verify all``
does with its findings, in this tree: each host's findings made again (evidence redacted when created), every audit
event written as a verify writes it (the fleet's request, each host's request, its findings with its ending, the
fleet's ending) into a fresh SQLite file, and the fleet's ``--json`` document printed (to nowhere). It prints the
median CPU-seconds (``process_time``: the audit worker's thread included) over ``--repeats``, redaction's caches
cleared before each. To compare two trees, run it in each, alternating (docs/benchmarks.md "the run's own work")::

    .venv/bin/python -m bench.run_work_bench fleet.json --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.cli import output
from bot.cli.fleet_view import fleet_json
from commands import redact
from commands.findings import Evidence, Finding
from commands.operation import OperationResult, Origin
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.verify.fleet import FleetResult
from commands.vocabulary import Operation


def findings_of(host: dict[str, Any]) -> list[Finding]:
    return [Finding(check["name"], check["status"], check["summary"],
                    Evidence.of(check["evidence"]["command"], check["evidence"]["exit_status"],
                                check["evidence"]["output"], check["evidence"]["duration_s"])
                    if check["evidence"] else None, check.get("details") or {}) for check in host["checks"]]


async def one_run(fleet: dict[str, Any], db: Path) -> float:
    store = AuditStore.open(db)
    try:
        origin = Origin.local_user()
        ending_with_findings = "ending" in inspect.signature(audit_log(store).checks).parameters  # an older tree
        started = time.process_time()
        fleet_log = audit_log(store, Operation.VERIFY, fleet["operation_id"], None, origin.actor)
        hosts = [recorded["host"] for recorded in fleet["hosts"]]
        await fleet_log.requested(origin, fleet={"target": fleet["target"], "hosts": hosts})

        async def host(recorded: dict[str, Any]) -> OperationResult:
            log = audit_log(store, Operation.VERIFY, recorded["operation_id"], recorded["host"], origin.actor)
            await log.requested(origin, checks=[check["name"] for check in recorded["checks"]],
                                fleet_operation_id=fleet["operation_id"])
            findings = findings_of(recorded)
            result = OperationResult(recorded["operation_id"], Operation.VERIFY, recorded["host"],
                                     recorded["started_at"], recorded["duration_s"], findings)
            if ending_with_findings:
                await log.checks(findings, ending=Finished.of(result))
            else:
                await log.checks(findings)
                await log.finished(Finished.of(result))
            return result

        results = await asyncio.gather(*(host(recorded) for recorded in fleet["hosts"]))
        done = FleetResult(fleet["operation_id"], Operation.VERIFY, fleet["target"], fleet["started_at"],
                           fleet["duration_s"], list(results))
        await fleet_log.finished(Finished(done.verdict, counts=dict(done.counts())))
        document = fleet_json(done)
        json_text = getattr(output, "json_text", None)  # an older tree printed it indented
        _ = json_text(document) if json_text else json.dumps(document, indent=2, ensure_ascii=False)
        return time.process_time() - started
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fleet_json", type=Path, help="a `proofbot verify all --json` output")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fleet = json.loads(args.fleet_json.read_text())
    cpu = []
    for _ in range(args.repeats):
        redact._redact_remembered.cache_clear()
        redact.is_secret_name.cache_clear()
        with tempfile.TemporaryDirectory() as folder:
            cpu.append(asyncio.run(one_run(fleet, Path(folder) / "audit.db")))
    print(f"run work CPU median {statistics.median(cpu):.4f} s over {len(cpu)} ({' '.join(f'{c:.4f}' for c in cpu)})")


if __name__ == "__main__":
    main()
