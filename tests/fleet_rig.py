"""A fleet of inventory hosts over the two loopback lab hosts (and a black-holed proxy): inventory entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.demo.host import DemoHost


def fleet_entry(host: DemoHost, port: int | None = None, known_hosts: Path | None = None) -> dict[str, Any]:
    """``host``'s inventory entry, reached on ``port`` (a DelayProxy) when given."""
    document = host.inventory()
    entry: dict[str, Any] = document["hosts"][host.name]
    entry["ssh"] = {"known_hosts": str(known_hosts or host.known_hosts), "client_keys": [str(host.client_key)]}
    if port is not None:
        entry["port"] = port
    return entry


def fleet_document(hosts: dict[str, dict[str, Any]], template: DemoHost, **fleet: Any) -> str:
    """An inventory of ``hosts`` in one group ``gpu-west``, with these ``fleet`` settings."""
    document = template.inventory()
    document["hosts"] = hosts
    document["fleet"] = fleet
    document["groups"] = {"gpu-west": list(hosts)}
    return yaml.safe_dump(document, sort_keys=False)


def proxied_known_hosts(host: DemoHost, port: int, path: Path) -> Path:
    """A known_hosts file that knows ``host``'s key at 127.0.0.1:port."""
    path.write_text(f"[127.0.0.1]:{port} " + host.known_hosts.read_text().split(" ", 1)[1])
    return path
