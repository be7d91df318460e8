"""Every CLI subcommand's arguments and help, and nothing else: building the parser loads no command's code.

``proofbot verify`` starts its SSH handshake before the rest of the CLI is loaded (see
``bot.cli.verify``); a parser that imported every command would load it all first.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from commands.store import DEFAULT_LIMIT, MAX_LIMIT


def add_host_and_output_arguments(parser: argparse.ArgumentParser, *, targets: bool = False) -> None:
    """HOST (or, with ``targets``, one or more hosts and groups as ``args.targets``), --json and -v,
    which every command that acts on a host takes."""
    if targets:
        parser.add_argument("targets", nargs="+", metavar="TARGET", help="hosts and groups from the inventory")
    else:
        parser.add_argument("host", metavar="HOST")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the evidence of passing checks too")
    parser.add_argument("--strict", action="store_true",
                        help="a warning exits 1 too (e.g. for CI: a service still running the old code)")


def verify_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_and_output_arguments(parser, targets=True)
    parser.add_argument("--backup", metavar="NAME",
                        help="backup to compare with (default: the only one); in a fleet, the hosts that have it")
    parser.add_argument("--no-probe", action="store_true",
                        help="do not send the inventory's probe (one real request); it is reported skipped")


def restore_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_and_output_arguments(parser)
    parser.add_argument("backup", nargs="?", metavar="BACKUP", help="backup name (default: the only one)")
    parser.add_argument("--undo", metavar="SNAPSHOT_DIR", help="put back a snapshot an earlier restore kept")
    parser.add_argument("--yes", action="store_true", help="apply without asking")
    parser.add_argument("--move-extras", action="store_true",
                        help="also move extra files found in the watch dirs into the snapshot")


def restart_arguments(parser: argparse.ArgumentParser) -> None:
    add_host_and_output_arguments(parser)
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def audit_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("host", nargs="?", metavar="HOST|verify|export",
                         help="a host from the inventory (default: across hosts), `verify` or `export`")
    command.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT, metavar="N",
                         help=f"how many operations (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})")
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.add_argument("--anchor", metavar="ID:HASH",
                         help="with verify: a head printed earlier that the chain must still hold")
    stream = command.add_argument_group("audit stream (to a SIEM; docs/observability.md)")
    stream.add_argument("--to", metavar="URL", help="stream: POST the events as JSON batches to this webhook")
    stream.add_argument("--syslog", metavar="HOST:PORT", help="stream: RFC 5424 syslog over TCP (octet counting)")
    stream.add_argument("--state", metavar="PATH",
                        help="stream: the cursor file (default: the database's path + .stream.json)")
    stream.add_argument("--once", action="store_true", help="stream: exit when caught up (cron); else follow")
    command.add_argument("--sqlite", metavar="FILE", type=Path,
                         help="with export: the SQLite file to write (for Datasette and `audit verify --db FILE`)")
    command.add_argument("--force", action="store_true", help="with export: replace FILE if it exists")


def _limit(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"N must be a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def ping_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hosts", nargs="*", metavar="TARGET", help="hosts and groups to ping (default: every host)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show each SSH value used (address, port, user, keys, known_hosts, jump, "
                             "certificates) and where it came from")


def inventory_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["check", "show"],
                        help="check: validate the inventory; show HOST: every SSH value resolved for HOST and the "
                             "file:line it came from (as `ssh -G`); both connect to nothing")
    parser.add_argument("host", nargs="?", metavar="HOST", help="show: the host")
    parser.add_argument("--json", action="store_true", help="print one JSON object (errors: every problem listed)")


def policy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="HOST|GROUP",
                        help="which policy rules each operation there (default: every policy, in order)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class Arguments(NamedTuple):
    """One registry operation's CLI arguments and the help printed under them."""

    add: Callable[[argparse.ArgumentParser], None]
    epilog: str = ""


RESTART_EPILOG = (
    "HOST may be a group of the inventory (or `all`): a rolling restart, one plan and one confirmation "
    "for every host, fleet.restart_batch hosts at a time, each proven before the next; it halts at the "
    "first host not proven (docs/restart.md, \"Rolling restart\").")

OPERATION_ARGUMENTS: dict[str, Arguments] = {
    "verify": Arguments(verify_arguments),
    "restore": Arguments(restore_arguments),
    "restart": Arguments(restart_arguments, RESTART_EPILOG),
    "audit": Arguments(audit_arguments, "`proofbot audit verify` checks the log's hash chain; `proofbot audit stream "
                                       "--to URL` sends it to a SIEM."),
    "policy": Arguments(policy_arguments, "A user group's members need Slack: `/policy` in Slack shows them."),
}
