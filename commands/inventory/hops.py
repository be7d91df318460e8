"""``ssh.jump``: hops as written (``[user@]host[:port]``, ``a,b`` a chain, or a list), and each host's
chain resolved to addresses and the SSH settings each hop logs in with."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from commands.errors import InventoryError
from commands.frozen import Frozen
from commands.inventory.hosts import Host
from commands.inventory.settings import Hop
from commands.ssh_config.defaults import ADDRESS, MAX_HOPS, USER_NAME

_HOP = re.compile(r"(?:(?P<user>[^@]*)@)?(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:\[\]]*))(?::(?P<port>[^:]*))?")


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class HopSpec(Frozen):
    """One hop as written: ``[user@]host[:port]``, host an inventory host's name or an address."""

    written: str
    user: str | None
    host: str
    port: int | None
    # A ProxyJump hop of the ssh config, resolved through it: address, port and what it changes of
    # the host's ssh settings (commands/ssh_config/entry.py ``_hops``).
    config: Mapping[str, Any] | None = None


def jump_spec(source: str, key: str, value: object) -> list[HopSpec]:
    """``jump`` as written (a string, ``a,b`` a chain, or a list of such) as hops; bad input names key."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise InventoryError(f"{source}: {key}: a hop (`bastion`, `user@host:port`), `a,b` for a chain, "
                             "or a list of hops")
    parts = [part.strip() for item in items for part in item.split(",") if item.strip()]
    if len(parts) > MAX_HOPS:
        raise InventoryError(f"{source}: {key}: at most {MAX_HOPS} hops, got {len(parts)}")
    return [hop_spec(source, key, part) for part in parts]


def hop_spec(source: str, key: str, written: str) -> HopSpec:
    user, at, rest = written.rpartition("@")
    if at and not USER_NAME.fullmatch(user):
        raise InventoryError(f"{source}: {key}: not a valid user name in hop {written!r}")
    if rest.count(":") > 1 and not rest.startswith("["):
        host, port_text = rest, ""  # a bare IPv6 address: no port can be told apart
    else:
        match = _HOP.fullmatch(rest)
        host = (match.group("v6") or match.group("host") or "") if match else ""
        port_text = (match.group("port") or "") if match else "?"
        if match and match.group("port") is not None and not port_text:
            port_text = "?"
    if not ADDRESS.fullmatch(host):
        raise InventoryError(f"{source}: {key}: hop {written!r} is not `host`, `user@host:port` or `[v6]:port`")
    port = int(port_text) if port_text.isdigit() and len(port_text) <= 5 else None
    if port_text and (port is None or not 1 <= port <= 65535):
        raise InventoryError(f"{source}: {key}: hop {written!r}: the port must be 1-65535")
    return HopSpec(written, user or None, host, port)


def resolve_jumps(source: str, hosts: dict[str, Host], jumps: dict[str, tuple[str, list[HopSpec]]]
                   ) -> dict[str, Host]:
    """Each host with its hops resolved: an inventory host's name brings that host's address, port and
    SSH settings (its own jump is not followed: the chain written is the whole path); anything else is
    an address reached with the host's own settings. A host met in its own chain is reached through
    the hops before it, so `jump: bastion` in the defaults does not loop on the bastion itself."""
    resolved: dict[str, Host] = {}
    for name, host in hosts.items():
        key, specs = jumps[name]
        hops: list[Hop] = []
        for spec in specs:
            if spec.host == name:
                break
            if spec.config is not None:  # resolved through the ssh config; `host` is its alias there
                hops.append(Hop(name=spec.written, address=spec.config["address"], port=spec.config["port"],
                                ssh=host.ssh.model_copy(update={**spec.config["ssh"], "jump": ()})))
                continue
            known = hosts.get(spec.host)
            settings = known.ssh if known is not None else host.ssh
            update: dict[str, Any] = {"jump": ()}
            if known is None:  # ssh -J never passes -o HostKeyAlias on to a hop: it is looked up by its address
                update["host_key_alias"] = None
            if spec.user:
                update["user"] = spec.user
            hops.append(Hop(
                name=spec.host if known is not None and spec.written == spec.host else spec.written,
                address=known.address if known is not None else spec.host,
                port=spec.port or (known.port if known is not None else 22),
                ssh=settings.model_copy(update=update)))
        if len({(hop.address, hop.port) for hop in hops}) < len(hops):
            raise InventoryError(f"{source}: {key}: a hop is listed twice in {name}'s chain")
        resolved[name] = host.model_copy(update={"ssh": host.ssh.model_copy(update={"jump": tuple(hops)})})
    return resolved
