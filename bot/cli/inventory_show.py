"""``proofbot inventory show HOST [--json]``: the SSH values resolved for one host and their origins.

It connects to nothing: what ``ssh -G`` is to OpenSSH.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bot.cli.output import SCHEMA_VERSION
from bot.cli.session import inventory_of
from commands.errors import UsageError
from commands.ssh_config.show import describe


def _line(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "none"
    return "none" if value is None else str(value)


def render(shown: dict[str, Any]) -> str:
    ssh = shown["ssh"]
    width = max(len(key) for key in ssh)
    lines = [shown["host"]]
    for key, entry in ssh.items():
        if key == "jump":
            hops = entry["value"]
            text = " → ".join(f"{hop['user']}@{hop['address']}:{hop['port']}" for hop in hops) or "none"
            lines.append(f"  {key.ljust(width)}  {text}  ← {entry['origin']}")
            for hop in hops:
                lines.append(f"  {''.ljust(width)}    {hop['name']}: keys {_line(hop['identity_files'])}; known_hosts "
                             f"{_line(hop['known_hosts'])}, then {_line(hop['global_known_hosts'])}; looked up as "
                             f"{hop['trust']['looked_up_as']}")
            continue
        lines.append(f"  {key.ljust(width)}  {_line(entry['value'])}  ← {entry['origin']}")
    trust = shown["trust"]
    lines.append(f"  trust: the host key is looked up as {trust['looked_up_as']} in {_line(trust['files'])}; "
                 f"{trust['unknown_or_changed_key']}; {trust['revoked']}")
    return "\n".join(lines)


async def run_show(args: argparse.Namespace) -> int:
    if not args.host:
        raise UsageError("inventory show needs a HOST", hint="proofbot inventory show HOST [--json]")
    inventory = inventory_of(args)
    shown = describe(inventory.host(args.host))
    if args.json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, **shown}, indent=2, ensure_ascii=False))
    else:
        print(render(shown))
    return 0
