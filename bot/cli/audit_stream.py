"""``proofbot audit stream --to URL [--syslog HOST:PORT] [--state PATH] [--once]``: the audit log to a SIEM."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bot.cli.audit import open_existing
from bot.logs import configure_logging
from commands.errors import UsageError
from commands.redact import redact
from commands.stream.cursor import StreamState
from commands.stream.run import Settings, stream
from commands.stream.targets import AUTHORIZATION_ENV, HttpTarget, SyslogTarget, Target


async def run_stream(db: Path | str, args: argparse.Namespace) -> int:
    configure_logging()
    if not (args.to or args.syslog):
        raise UsageError("audit stream needs a target", hint="--to URL (a webhook) and/or --syslog HOST:PORT")
    if isinstance(db, str) and not args.state:
        raise UsageError("audit stream from PostgreSQL needs a cursor file",
                         hint="pass --state PATH (beside a SQLite file it defaults to FILE.stream.json)")
    state = StreamState(Path(args.state) if args.state else Path(db).with_name(Path(db).name + ".stream.json"))
    targets: list[Target] = []
    try:
        if args.to:
            targets.append(HttpTarget(args.to, authorization=os.environ.get(AUTHORIZATION_ENV) or None))
        if args.syslog:
            targets.append(SyslogTarget(args.syslog))
        store = open_existing(db)
        try:
            sent = await stream(store, targets, state, Settings(once=args.once))
        finally:
            store.close()
    finally:
        for target in targets:
            await target.close()
    for name, count in sent.items():
        print(f"{count} event(s) sent to {redact(name)}; acknowledged up to seq {state.cursor(name).seq}")
    return 0
