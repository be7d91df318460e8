"""The options proofbot hands asyncssh for one host, and what ``proofbot ping -v`` shows of them.

At connect time, ``client_options`` reads known_hosts as OpenSSH would (``commands.known_hosts``),
checks the key files exist, refuses an expired (or not yet valid) user certificate with its
dates, loads agent keys only with ``ssh.agent: true``, and returns asyncssh keyword arguments
that check host keys always and never forward the agent. The host key is judged by proofbot's
own decision (``TrustingClient``), not asyncssh's matching: asyncssh also matches the peer's IP
and CIDR patterns and has no fallback from a failed certificate to its key, where OpenSSH does
neither and does. Where each value came from was decided at load (``commands/ssh_config/``).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import asyncssh

from commands.errors import AuthenticationFailed, HostKeyNotVerified
from commands.known_hosts import Decision, Trust, decide, lookup_for, note_address_entry, trust_for
from commands.known_hosts_file import FileTooBig
from commands.ssh.ciphers import algorithm_options, without_ignore_padding
from commands.ssh.failures import SSH_FAILURES, At, HostKeyRefused, Step, as_error

if TYPE_CHECKING:
    from commands.inventory import Hop, Host


def known_hosts_files(host: Host | Hop) -> list[str]:
    """The known_hosts files that exist, user files then global ones (OpenSSH's UserKnownHostsFile, then
    GlobalKnownHostsFile); none existing is an error naming them all."""
    paths = [os.path.expanduser(path) for path in host.ssh.known_hosts_list()]
    global_paths = [os.path.expanduser(path) for path in host.ssh.global_known_hosts]
    present = [path for path in paths + global_paths if os.path.isfile(path)]
    if not present:
        shown = ", ".join(paths)
        raise HostKeyNotVerified(
            f"{host.name}: known_hosts file{'s' if len(paths) > 1 else ''} {shown} "
            f"do{'' if len(paths) > 1 else 'es'} not exist"
            + (f" (nor the global {', '.join(global_paths)})" if global_paths else ""),
            hint="create one with the host's verified key or its CA's @cert-authority line "
                 "(ssh-keyscan, checked out of band)")
    return present


def host_trust(host: Host | Hop) -> Trust:
    """What known_hosts says about host, as OpenSSH 9.2 reads it (the files are read; run it off the loop)."""
    known_hosts_files(host)
    lookup = lookup_for(host.address, host.port, host.ssh.host_key_alias)
    try:
        return trust_for(lookup, [os.path.expanduser(path) for path in host.ssh.known_hosts_list()],
                         [os.path.expanduser(path) for path in host.ssh.global_known_hosts])
    except FileTooBig as exc:
        raise HostKeyNotVerified(f"{host.name}: {exc}", hint="a known_hosts file this big is not one OpenSSH "
                                 "tools write: check what wrote it") from None


class TrustingClient(asyncssh.SSHClient):
    """Makes asyncssh judge the host key by ``commands.known_hosts.decide``.

    asyncssh has no public hook that sees a host certificate, so for this one connection its
    ``validate_server_host_key`` is wrapped: proofbot decides on the key as sent; a refused key
    ends the handshake with proofbot's reason, an accepted one goes on to asyncssh's own check
    (with the certificate, or with its plain key where OpenSSH falls back to it), so the key
    exchange's signature is still verified by asyncssh against the key proofbot accepted.
    """

    def __init__(self, trust: Trust) -> None:
        self.trust = trust
        self.decision: Decision | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        without_ignore_padding(conn)
        original = conn.validate_server_host_key
        peer = conn.get_extra_info("peername")

        def validate(key_data: bytes) -> asyncssh.SSHKey:
            self.decision = decide(self.trust, key_data, time.time())
            if not self.decision.accepted:
                if peer and self.decision.kind == "unknown":
                    self.decision = note_address_entry(self.trust, self.decision, str(peer[0]), key_data)
                raise HostKeyRefused(self.decision)
            return original(self.decision.key_data)

        conn.validate_server_host_key = validate  # type: ignore[method-assign]


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


def check_certificate(host: Host | Hop, path: str, now: float) -> None:
    """A user certificate past its valid_before (or before its valid_after) is refused with its dates."""
    host_name = host.name
    try:
        cert = asyncssh.read_certificate(path)
    except SSH_FAILURES as exc:
        raise as_error(exc, At(host, Step.CERTIFICATE, shown=path)) from None
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
    except SSH_FAILURES as exc:
        raise as_error(exc, At(host, Step.AGENT, shown=socket_path)) from None
    try:
        yield keys
    finally:
        agent.close()
        await agent.wait_closed()


@asynccontextmanager
async def client_options(host: Host | Hop, now: float, trust: Trust | None = None) -> AsyncIterator[dict[str, Any]]:
    """asyncssh keyword arguments for host (host keys always checked, the agent never forwarded),
    valid while the context lasts (agent keys sign through the open agent connection). ``trust`` is
    ``host_trust(host)`` when the caller read known_hosts already (off the event loop)."""
    settings = host.ssh
    if trust is None:
        trust = await asyncio.to_thread(host_trust, host)
    keys = _key_files(host)
    certs = _cert_files(host, keys)
    for path in certs:
        check_certificate(host, path, now)
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
            # asyncssh's own check after proofbot's decision: a superset of what the decision accepts
            "known_hosts": trust.asyncssh_known_hosts(),
            "server_host_key_algs": trust.algorithms(),  # OpenSSH's order, so the host presents the same key
            "host_key_alias": trust.lookup.cert_name,  # the name a host certificate is checked for
            "client_factory": lambda: TrustingClient(trust),
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
            **algorithm_options(),  # ciphers and MACs only: kex and host key algorithms stay asyncssh's
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
        # the name known_hosts is searched for, as OpenSSH's: [address]:port, address, or HostKeyAlias
        "host_key_name": {"value": lookup_for(host.address, host.port, settings.host_key_alias).name,
                          "origin": origin("host_key_alias") if settings.host_key_alias else "address and port"},
        "jump": {"value": [f"{hop.ssh.user}@{hop.address}:{hop.port}" for hop in settings.jump] or None,
                 "origin": origin("jump") if settings.jump else "none"},
        "agent": {"value": "SSH_AUTH_SOCK" if settings.agent else False,
                  "origin": origin("agent")},
        "agent_forwarding": {"value": False, "origin": "never (proofbot does not forward the agent)"},
        "ciphers": {"value": algorithm_options()["encryption_algs"],
                    "origin": "OpenSSH's default set, AES-GCM first (a config's Ciphers must give that set)"},
    }
    if settings.config is not None:
        shown["ssh_config"] = {"value": settings.config, "origin": origin("config")}
    if "ignored" in origins:
        shown["ignored_from_config"] = {"value": origins["ignored"],
                                        "origin": "not taken: they change nothing proofbot does (docs/ssh.md: "
                                                  "what proofbot takes from ssh_config)"}
    return shown
