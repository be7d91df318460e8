"""The options proofbot hands asyncssh for one host, and what ``proofbot ping -v`` shows of them.

At connect time, ``client_options`` checks the known_hosts and key files exist, refuses an
expired (or not yet valid) user certificate with its dates, loads agent keys only with
``ssh.agent: true``, and returns asyncssh keyword arguments that check host keys always and
never forward the agent. Where each value came from was decided at load
(``commands/ssh_config.py``).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncssh

from commands.errors import AuthenticationFailed, HostKeyNotVerified

if TYPE_CHECKING:
    from commands.inventory import Hop, Host


def known_hosts_files(host: Host | Hop) -> list[str]:
    """The known_hosts files that exist, in order; none existing is an error naming them all."""
    paths = [os.path.expanduser(path) for path in host.ssh.known_hosts_list()]
    present = [path for path in paths if os.path.isfile(path)]
    if not present:
        shown = ", ".join(paths)
        raise HostKeyNotVerified(
            f"{host.name}: known_hosts file{'s' if len(paths) > 1 else ''} {shown} "
            f"do{'' if len(paths) > 1 else 'es'} not exist",
            hint="create one with the host's verified key or its CA's @cert-authority line "
                 "(ssh-keyscan, checked out of band)")
    return present


def _key_files(host: Host | Hop) -> list[str]:
    """Identity files to offer: a file the inventory names must exist; others (config, default) may be absent."""
    origins: dict[str, str] = getattr(host, "origins", {})  # a jump hop (Hop) has none: its keys may be absent
    written = origins.get("client_keys", "default").startswith("inventory")
    files = [os.path.expanduser(path) for path in host.ssh.client_keys]
    for path in files:
        if written and not os.path.isfile(path):
            raise AuthenticationFailed(f"{host.name}: client key {path} ({origins['client_keys']}) does not exist",
                                       hint="fix ssh.client_keys in the inventory")
    return [path for path in files if os.path.isfile(path)]


def _cert_files(host: Host | Hop, keys: list[str]) -> list[str]:
    certs = [os.path.expanduser(path) for path in host.ssh.client_certs]
    origins: dict[str, str] = getattr(host, "origins", {})
    for path in certs:
        if not os.path.isfile(path):
            raise AuthenticationFailed(f"{host.name}: user certificate {path} "
                                       f"({origins.get('client_certs', 'inventory')}) does not exist")
    beside = [key + "-cert.pub" for key in keys if os.path.isfile(key + "-cert.pub")]
    return certs + [path for path in beside if path not in certs]


def _utc(stamp: int) -> str:
    if stamp >= 2**63 - 1 or stamp > 253402300799:
        return "forever"
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_certificate(host_name: str, path: str, now: float) -> None:
    """A user certificate past its valid_before (or before its valid_after) is refused with its dates."""
    try:
        cert = asyncssh.read_certificate(path)
    except (OSError, asyncssh.KeyImportError) as exc:
        raise AuthenticationFailed(f"{host_name}: cannot read user certificate {path}: {exc}") from None
    valid_after = int(getattr(cert, "_valid_after", 0))
    valid_before = int(getattr(cert, "_valid_before", 2**64 - 1))
    if now >= valid_before:
        raise AuthenticationFailed(f"{host_name}: user certificate {path} expired at {_utc(valid_before)}",
                                   hint="have the CA sign a new one (ssh-keygen -s CA -V …)")
    if now < valid_after:
        raise AuthenticationFailed(f"{host_name}: user certificate {path} is not valid before {_utc(valid_after)}",
                                   hint="check the clock of this machine, or wait for the certificate's start")


@asynccontextmanager
async def _agent(host: Host | Hop) -> AsyncIterator[list[asyncssh.SSHKeyPair]]:
    """The agent's keys, usable (the agent connection open) while the context lasts."""
    socket_path = os.environ.get("SSH_AUTH_SOCK", "")
    if not socket_path:
        raise AuthenticationFailed(f"{host.name}: ssh.agent is true but SSH_AUTH_SOCK is not set",
                                   hint="start proofbot from a shell with an ssh-agent, or set ssh.agent: false")
    try:
        agent = await asyncssh.connect_agent(socket_path)
        keys = list(await agent.get_keys())
    except (OSError, asyncssh.Error, ValueError) as exc:
        raise AuthenticationFailed(f"{host.name}: cannot use the ssh agent at SSH_AUTH_SOCK={socket_path}: {exc}") \
            from None
    try:
        yield keys
    finally:
        agent.close()
        await agent.wait_closed()


@asynccontextmanager
async def client_options(host: Host | Hop, now: float) -> AsyncIterator[dict[str, Any]]:
    """asyncssh keyword arguments for host (host keys always checked, the agent never forwarded),
    valid while the context lasts (agent keys sign through the open agent connection)."""
    settings = host.ssh
    known_hosts = known_hosts_files(host)
    keys = _key_files(host)
    certs = _cert_files(host, keys)
    for path in certs:
        check_certificate(host.name, path, now)
    async with AsyncExitStack() as stack:
        client_keys: list[Any] = list(keys)
        if settings.agent:
            client_keys += await stack.enter_async_context(_agent(host))
        if not client_keys:
            raise AuthenticationFailed(
                f"{host.name}: no client key to offer: none of {', '.join(settings.client_keys)} exists"
                + ("" if settings.agent else " and ssh.agent is false"),
                hint="set ssh.client_keys in the inventory (or ssh.agent: true at a terminal)")
        yield {
            "username": settings.user,
            "known_hosts": known_hosts,
            "client_keys": client_keys,
            "client_certs": certs,
            "config": None,  # the operator's config was read at load, only for the values in TAKEN
            "agent_path": None,  # agent keys, when allowed, are passed above as client keys
            "agent_forwarding": False,
            "password": None,
            "kbdint_auth": False,
            "gss_auth": False,
            "gss_kex": False,
            "host_based_auth": False,
            "x509_trusted_certs": None,
        }


def effective(host: Host) -> dict[str, dict[str, Any]]:
    """Each SSH value proofbot will use for host and where it came from (``proofbot ping -v``)."""
    settings = host.ssh
    origins = host.origins

    def origin(key: str) -> str:
        return origins.get(key, "default")

    keys = [os.path.expanduser(path) for path in settings.client_keys]
    beside = [key + "-cert.pub" for key in keys if os.path.isfile(key + "-cert.pub")]
    shown: dict[str, dict[str, Any]] = {
        "address": {"value": host.address, "origin": origin("address")},
        "port": {"value": host.port, "origin": origin("port")},
        "user": {"value": settings.user, "origin": origin("user")},
        "identity_files": {"value": [path + ("" if os.path.isfile(path) else " (missing)") for path in keys],
                           "origin": origin("client_keys")},
        "certificates": {"value": list(settings.client_certs) + beside,
                         "origin": ", ".join(filter(None, [
                             origin("client_certs") if settings.client_certs else "",
                             "beside the identity file" if beside else ""])) or "none"},
        "known_hosts": {"value": [path + ("" if os.path.isfile(os.path.expanduser(path)) else " (missing)")
                                  for path in settings.known_hosts_list()], "origin": origin("known_hosts")},
        "global_known_hosts": {"value": list(settings.global_known_hosts), "origin": origin("global_known_hosts")},
        "host_key_alias": {"value": settings.host_key_alias, "origin": origins.get("host_key_alias", "none")},
        "jump": {"value": [f"{hop.ssh.user}@{hop.address}:{hop.port}" for hop in settings.jump] or None,
                 "origin": origin("jump") if settings.jump else "none"},
        "agent": {"value": "SSH_AUTH_SOCK" if settings.agent else False,
                  "origin": origin("agent")},
        "agent_forwarding": {"value": False, "origin": "never (proofbot does not forward the agent)"},
    }
    if settings.config is not None:
        shown["ssh_config"] = {"value": settings.config, "origin": origin("config")}
    if "ignored" in origins:
        shown["ignored_from_config"] = {"value": origins["ignored"],
                                        "origin": "not taken: they change nothing proofbot does (README: "
                                                  "what proofbot takes from ssh_config)"}
    return shown
