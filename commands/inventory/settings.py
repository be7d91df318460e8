"""The inventory's settings sections: ``ssh`` (defaults and per-host overrides, and a host's resolved hops),
``fleet``, ``limits`` and ``approvals``, with the base every inventory model shares."""

from __future__ import annotations

import os
import re
from dataclasses import field
from pathlib import Path
from typing import Any

from commands.inventory.schema import Model, model, rules
from commands.ssh_config import defaults

Strict = Model  # the base every inventory model shares (commands/inventory/schema.py)


def matching(pattern: re.Pattern[str], value: str, what: str) -> str:
    """value when the whole of it matches pattern; else ``what: 'value'`` (the validator's error)."""
    if not pattern.fullmatch(value):
        raise ValueError(f"{what}: {value!r}")
    return value


def absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path, got {value!r}")
    if "\x00" in value or "\n" in value:
        raise ValueError("must not contain NUL or newline characters")
    return value


@model
class SshSettings(Strict):
    user: str = defaults.USER
    # One file or several (as OpenSSH's `UserKnownHostsFile a b`): hashed names, [host]:port,
    # @cert-authority and @revoked lines are all honoured.
    known_hosts: str | list[str] = defaults.KNOWN_HOSTS
    # OpenSSH's GlobalKnownHostsFile: read after the user's files (their @revoked lines count too).
    global_known_hosts: list[str] = field(default_factory=lambda: list(defaults.GLOBAL_KNOWN_HOSTS))
    # OpenSSH's HostKeyAlias: the name looked up in known_hosts instead of the host's address.
    host_key_alias: str | None = None
    client_keys: list[str] = field(default_factory=lambda: list(defaults.CLIENT_KEYS))
    # User certificates; a KEY-cert.pub beside a client key is used without being named here.
    client_certs: list[str] = field(default_factory=list)
    # The operator's OpenSSH client config (opt-in): see commands/ssh_config/ for what is taken.
    config: str | None = None
    # Keys of the ssh-agent at SSH_AUTH_SOCK (opt-in); the agent is never forwarded.
    agent: bool = field(default=False, metadata=rules(strict=True))
    connect_timeout_s: float = field(default=10, metadata=rules(gt=0))
    command_timeout_s: float = field(default=60, metadata=rules(gt=0))
    # SSH connections open at once across all hosts (one per host however many operations overlap).
    max_connections: int = field(default=32, metadata=rules(ge=1, le=4096))
    # The hops to the host (ProxyJump), resolved at load from `jump:` (commands/inventory/hops.py).
    jump: tuple[Hop, ...] = ()
    # OpenSSH's defaults: MaxStartups 10 (unauthenticated connections per sshd) and MaxSessions 10.
    max_startups: int = field(default=10, metadata=rules(ge=1, le=1024))
    max_sessions: int = field(default=10, metadata=rules(ge=1, le=1024))
    # `serve` only (the CLI closes at exit): a connection unused this long is closed; 0 closes at once.
    # 600 s outlives a 5-minute watch with its jitter, so a watched host never logs in twice.
    idle_close_s: float = field(default=600, metadata=rules(ge=0, le=86400))
    # SSH keepalive (asyncssh keepalive_interval; 3 unanswered = the link is dead, ~4x this to notice).
    keepalive_s: float = field(default=2, metadata=rules(gt=0, le=3600))

    def known_hosts_list(self) -> list[str]:
        return [self.known_hosts] if isinstance(self.known_hosts, str) else list(self.known_hosts)

    def known_hosts_path(self) -> Path:
        """The first known_hosts file (where a message names one)."""
        return Path(os.path.expanduser(self.known_hosts_list()[0]))

    def client_key_paths(self) -> list[Path]:
        return [Path(os.path.expanduser(key)) for key in self.client_keys]


def _user_is_a_name(value: str, _: dict[str, Any]) -> str:
    return matching(defaults.USER_NAME, value, "not a valid user name")


def _paths(name: str) -> Any:
    def paths(value: str | list[str], _: dict[str, Any]) -> str | list[str]:
        written = [value] if isinstance(value, str) else value
        if name == "known_hosts" and not written:
            raise ValueError("name at least one known_hosts file: host keys are always checked")
        for path in written:
            if not path or "\x00" in path or "\n" in path:
                raise ValueError(f"not a file path: {path!r}")
        return value
    return (paths,)


SshSettings.checks = {"user": (_user_is_a_name,),
                      **{name: _paths(name) for name in ("known_hosts", "global_known_hosts", "client_keys",
                                                         "client_certs")}}


@model
class Hop(Strict):
    """One hop of ``ssh.jump``: where it is and how to log in; ``name`` is how messages call it."""

    name: str  # an inventory host's name, or the hop as written (user@address:port)
    address: str
    port: int = field(metadata=rules(ge=1, le=65535))
    ssh: SshSettings  # the inventory host's own settings, or the host's; jump always empty


@model
class FleetSettings(Strict):
    """How many hosts are worked on at once, and how long one host may take."""

    max_parallel: int = field(default=32, metadata=rules(ge=1, le=4096))
    # One host that hangs is reported "timed out after N s" and never holds the others.
    host_deadline_s: float = field(default=120, metadata=rules(gt=0))
    # Rolling restart: hosts restarted (and proven) at a time.
    restart_batch: int = field(default=1, metadata=rules(ge=1, le=4096))


@model
class Limits(Strict):
    """Operations in flight started from Slack (README "Slack"): a fleet is one operation; its hosts'
    verifies draw from ``hosts``, shared by every fleet in flight."""

    per_user: int = field(default=4, metadata=rules(ge=1, le=1024))
    total: int = field(default=16, metadata=rules(ge=1, le=4096))
    hosts: int = field(default=32, metadata=rules(ge=1, le=4096))


GROUP_TTL_S = 60.0  # how long a user group's members are trusted (docs/policies.md)


@model
class Approvals(Strict):
    approvers: list[str] = field(default_factory=list)
    allow_self_approval: bool = False
    expire_after_s: float = field(default=900, metadata=rules(gt=0))
    # A member removed from an approver user group stops counting once this has passed (0: ask at every click).
    group_ttl_s: float = field(default=GROUP_TTL_S, metadata=rules(ge=0, le=3600))
