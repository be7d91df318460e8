"""``proofbot audit [HOST] [--limit N] [--json]``, ``proofbot audit verify`` and ``proofbot audit export``.

None needs an inventory unless HOST is given (HOST is only looked up there, so an
unknown one exits 2 with the known hosts). All need an existing audit database: reading
a log must not create an empty one (a SQLite file; a PostgreSQL URL names a server's database).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bot.cli.command import CliCommand
from bot.cli.output import SCHEMA_VERSION
from bot.cli.session import inventory_of
from bot.cli.trail_text import render_chain, render_operations
from commands.errors import UsageError
from commands.operation import Origin
from commands.store.chain import ChainReport, parse_anchor, verify_chain
from commands.store.db import AuditStore, db_target
from commands.store.export import export_sqlite
from commands.store.pg import redacted_url
from commands.store.trail import recent_operations, record_view


async def run(args: argparse.Namespace) -> int:
    db = db_target(getattr(args, "db", None))
    if args.host == "verify":
        return await _verify(db, args)
    if args.host == "stream":
        from bot.cli.audit_stream import run_stream

        return await run_stream(db, args)
    if args.to or args.syslog or args.state or args.once:
        raise UsageError("--to, --syslog, --state and --once go with `proofbot audit stream`")
    if args.host == "export":
        return await _export(db, args)
    if args.anchor:
        raise UsageError("--anchor goes with `proofbot audit verify`")
    if args.sqlite is not None or args.force:
        raise UsageError("--sqlite and --force go with `proofbot audit export`")
    host = None
    if args.host is not None:
        host = inventory_of(args).host(args.host).name
    store = open_existing(db)
    try:
        records = await recent_operations(store, host, args.limit)
        await record_view(store, host=host, limit=args.limit, origin=Origin.local_user(), listed=records)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, "operations": [record.to_json() for record in records]},
                         indent=2, ensure_ascii=False))
    else:
        print(render_operations(records, host))
    return 0


async def _export(db: Path | str, args: argparse.Namespace) -> int:
    if args.sqlite is None:
        raise UsageError("`proofbot audit export` needs --sqlite FILE", hint="proofbot audit export --sqlite audit.db")
    store = open_existing(db)
    try:
        exported = await export_sqlite(store, args.sqlite, replace=args.force)
    finally:
        store.close()
    print(f"{exported.events} events written to {exported.path}; check it with "
          f"`proofbot audit verify --db {exported.path}`")
    return 0


async def _verify(db: Path | str, args: argparse.Namespace) -> int:
    anchor = parse_anchor(args.anchor) if args.anchor else None
    store = open_existing(db)
    try:
        report = await verify_chain(store, anchor)
    finally:
        store.close()
    print(json.dumps({"schema_version": SCHEMA_VERSION, **_report_json(report)}, indent=2) if args.json
          else render_chain(report, redacted_url(db) if isinstance(db, str) else db))
    return 0 if report.intact else 1


def open_existing(db: Path | str) -> AuditStore:
    if isinstance(db, Path) and not db.is_file():
        raise UsageError(f"no audit database at {db}", hint="pass --db PATH (or set PROOFBOT_DB)")
    return AuditStore.open(db, existing=True)


def _report_json(report: ChainReport) -> dict[str, Any]:
    broken = report.broken
    return {"events": report.events, "intact": report.intact,
            "head": {"event_id": report.head_id, "hash": report.head_hash},
            "broken": None if broken is None else
            {"event_id": broken.event_id, "problem": broken.problem, "detail": broken.detail},
            "missing_guards": list(report.missing_guards),
            "schema_differences": [d.to_json() for d in report.schema_differences]}


COMMAND = CliCommand("audit", run)
