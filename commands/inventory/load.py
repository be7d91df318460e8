"""Reading an inventory file: the top level, each host with the top-level ``ssh`` and ``packages`` merged in and
decided through the operator's ssh config, then hops and groups; every problem at once, each at its line."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from commands.errors import InventoryError
from commands.inventory.groups import expand_groups
from commands.inventory.hints import yaml_error_at
from commands.inventory.hops import HopSpec, resolve_jumps
from commands.inventory.hosts import NAME_PATTERN, Host, Inventory
from commands.inventory.problems import KeyPath, Problems, compose_and_load, key_lines, key_words
from commands.inventory.schema import Invalid, model
from commands.inventory.settings import Approvals, FleetSettings, Limits, SshSettings, Strict
from commands.ssh_config import resolve_entry
from commands.ssh_config.files import UnsafeFiles

if TYPE_CHECKING:
    from commands.inventory.policies import Policy
    from commands.inventory.watch import WatchEntry

INVENTORY_ENV = "PROOFBOT_INVENTORY"
DEFAULT_INVENTORY = "inventory.yml"


@model
class _InventoryFile(Strict):
    ssh: dict[str, Any] = field(default_factory=dict)
    approvals: Approvals = field(default_factory=Approvals)
    channels: list[str] | None = None
    policies: Any = None  # validated entry by entry (commands/inventory/policies.py)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    limits: Limits = field(default_factory=Limits)
    groups: dict[str, list[str]] = field(default_factory=dict)
    packages: dict[str, Any] = field(default_factory=dict)
    watch: Any = None  # commands/inventory/watch.py checks it, each entry at its line
    hosts: dict[str, dict[str, Any]]


_FILE_KEYS = {field.name for field in dataclasses.fields(_InventoryFile)}


def inventory_path(explicit: str | None) -> Path:
    return Path(explicit or os.environ.get(INVENTORY_ENV) or DEFAULT_INVENTORY)


def load_inventory(path: Path) -> Inventory:
    """Read and validate the inventory; every problem names the file and the key."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(
            f"{path}: inventory file not found",
            hint=f"pass --inventory PATH or set {INVENTORY_ENV}",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"{path}: cannot read inventory: {exc}") from None
    return parse_inventory(text, str(path))


def parse_inventory(text: str, source: str) -> Inventory:
    """Validate the whole file and raise one InventoryError listing every problem, each as
    ``FILE:LINE: KEY: what is wrong`` (a YAML syntax error as ``FILE:LINE:COL: not valid YAML: …``)."""
    try:
        root, raw = compose_and_load(text)
    except yaml.MarkedYAMLError as exc:
        line, column, what = yaml_error_at(text, exc)
        raise InventoryError(f"{source}:{line}:{column}: not valid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"{source}:1:1: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise InventoryError(f"{source}:1: top level must be a mapping with a 'hosts' key")
    lines: dict[KeyPath, int] = {}
    duplicates: list[tuple[KeyPath, int, int]] = []
    if root is not None:
        key_lines(root, (), lines, duplicates)
    problems = Problems(source, lines)
    for path, first, again in duplicates:
        lines[(*path, "(again)")] = again
        problems.add((*path, "(again)"), f"written twice (first on line {first}); YAML keeps only the last",
                     key=key_words(path))
    document = _document(raw, problems)
    top_ssh = dict(document.ssh)
    top_jump = ("ssh.jump", problems.hops(("ssh", "jump"), top_ssh.pop("jump", None)))
    top_ssh_problems: set[str] = set()
    try:
        SshSettings.model_validate(top_ssh)
    except Invalid as exc:
        problems.add_validation(("ssh",), exc, SshSettings)
        top_ssh_problems = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
    jumps: dict[str, tuple[str, list[HopSpec]]] = {}
    hosts = _hosts(document, top_ssh, problems, top_ssh_problems, jumps, top_jump)
    try:
        hosts = resolve_jumps(source, hosts, jumps)
    except InventoryError as exc:
        problems.add_raised(exc)
    groups = expand_groups(problems, document.groups, hosts, written_hosts=set(map(str, document.hosts)))
    watch, policies = _watch_and_policies(document, groups, problems)
    problems.raise_if_any()
    return Inventory(path=source, approvals=document.approvals, channels=document.channels, policies=policies,
                     fleet=document.fleet, limits=document.limits, hosts=hosts, groups=groups, watch=watch)


def _watch_and_policies(document: _InventoryFile, groups: dict[str, tuple[str, ...]],
                        problems: Problems) -> tuple[tuple[WatchEntry, ...], tuple[Policy, ...]]:
    """``watch`` and ``policies``; their modules load only for an inventory that writes them."""
    watch: tuple[WatchEntry, ...] = ()
    policies: tuple[Policy, ...] = ()
    if document.watch is not None:
        from commands.inventory.watch import parse_watch

        watch = parse_watch(problems, document.watch, set(map(str, document.hosts)), set(groups))
    if document.policies is not None:
        from commands.inventory.policies import validate_policies

        policies = validate_policies(problems, document.policies, {*map(str, document.hosts), *groups})
    return watch, policies


def _document(raw: dict[str, Any], problems: Problems) -> _InventoryFile:
    """The top level; a section that is wrong is reported and left out, so the others are still checked."""
    try:
        return _InventoryFile.model_validate(raw)
    except Invalid as exc:
        problems.add_validation((), exc, _InventoryFile)
        bad = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
    kept = {key: value for key, value in raw.items() if key not in bad and key in _FILE_KEYS}
    if "hosts" in bad and isinstance(raw.get("hosts"), dict):
        kept["hosts"] = {name: entry for name, entry in raw["hosts"].items()
                         if isinstance(name, str) and isinstance(entry, dict)}
    kept.setdefault("hosts", {})
    try:
        return _InventoryFile.model_validate(kept)
    except Invalid:  # already reported above
        return _InventoryFile(hosts={})


def _hosts(document: _InventoryFile, top_ssh: dict[str, Any], problems: Problems, top_ssh_problems: set[str],
           jumps: dict[str, tuple[str, list[HopSpec]]], top_jump: tuple[str, list[HopSpec]]) -> dict[str, Host]:
    """Each host validated with the top-level defaults merged in; its ``jump`` hops (as written) go to
    ``jumps`` for ``resolve_jumps``."""
    hosts: dict[str, Host] = {}
    hop_cache: dict[tuple[Any, ...], Any] = {}  # a config bastion shared by many hosts is resolved once per load
    for name, entry in document.hosts.items():
        where: KeyPath = ("hosts", str(name))
        if not NAME_PATTERN.fullmatch(str(name)):
            problems.add(where, "host names are letters, digits, '.', '_', '-'")
            continue
        if not isinstance(entry, dict):
            problems.add(where, "must be a mapping")
            continue
        own_ssh = entry.get("ssh") or {}
        if isinstance(own_ssh, dict) and "max_connections" in own_ssh:
            problems.add((*where, "ssh", "max_connections"), "a bound on the whole bot, "
                         "set it in the top-level ssh section only")
            own_ssh = {key: value for key, value in own_ssh.items() if key != "max_connections"}
        loader_only = [key for key in ("origins",) if key in entry]
        for key in loader_only:
            problems.add((*where, key), "not an inventory key (proofbot fills it in)")
        if not isinstance(own_ssh, dict):
            problems.add((*where, "ssh"), "must be a mapping")
        if loader_only or not isinstance(own_ssh, dict):
            continue
        jumps[str(name)] = top_jump
        # A jump the inventory writes (`[]` too) wins over the ssh config's ProxyJump, as every value does.
        jump_written = f"hosts.{name}.ssh.jump" if "jump" in own_ssh else "ssh.jump" if "jump" in document.ssh else None
        if "jump" in own_ssh:
            own_ssh = dict(own_ssh)
            jumps[str(name)] = (f"hosts.{name}.ssh.jump", problems.hops((*where, "ssh", "jump"), own_ssh.pop("jump")))
        try:
            merged, config_hops = resolve_entry(str(name), entry, top_ssh, own_ssh, problems.source, jump_written,
                                                hop_cache)
        except UnsafeFiles as exc:  # at the key naming each file: a file shared by every host is said once
            for path, message in exc.unsafe:
                problems.add(path, message)
            continue
        except InventoryError as exc:  # the operator's ssh config: its file and line are in the message
            problems.add_raised(exc)
            continue
        if config_hops:
            # The config's ProxyJump becomes this host's ssh.jump: the same shared bastion connection.
            jumps[str(name)] = (f"hosts.{name}", [HopSpec(hop["name"], None, hop["alias"], None, hop)
                                                  for hop in config_hops])
        # packages merge key by key like ssh: a host may name its own python or dists.
        own = entry.get("packages")
        if isinstance(own, dict) or (own is None and document.packages):
            merged["packages"] = {**document.packages, **(own or {})}

        def inherited(loc: KeyPath, own_ssh: Any = own_ssh) -> bool:
            # said once, at the top-level ssh key, not again for every host that inherits it
            return (len(loc) >= 2 and loc[0] == "ssh" and str(loc[1]) in top_ssh_problems
                    and not (isinstance(own_ssh, dict) and loc[1] in own_ssh))

        try:
            host = Host.model_validate(merged)
        except Invalid as exc:
            problems.add_validation(where, exc, Host, skip=inherited)
            continue
        bad_backups = [backup for backup in host.backups if not NAME_PATTERN.fullmatch(backup)]
        for backup_name in bad_backups:
            problems.add((*where, "backups", backup_name), "bad backup name")
        if not bad_backups:
            hosts[str(name)] = host
    return hosts
