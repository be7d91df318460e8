"""``proofbot inventory show HOST``: every SSH value proofbot will use for a host and where it came from, connecting
to nothing (what ``ssh -G`` is to OpenSSH). Pure: reads the loaded inventory only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commands.inventory import Hop, Host, SshSettings


def _value(value: Any, origin: str) -> dict[str, Any]:
    return {"value": value, "origin": origin}


def known_hosts_name(address: str, port: int, alias: str | None) -> str:
    """The name OpenSSH looks up in known_hosts: HostKeyAlias alone, else the host name (canonical, ASCII
    lower-cased); ``[name]:port`` off port 22. The decision's own rule, so the two never disagree."""
    from commands.known_hosts import lookup_for  # asyncssh with it: loaded only when a host is shown

    return lookup_for(address, port, alias).name


def trust(settings: SshSettings, address: str, port: int) -> dict[str, Any]:
    """The rules the host-key decision applies to this host (commands/known_hosts.py, as OpenSSH 9.2 decides)."""
    return {
        "looked_up_as": known_hosts_name(address, port, settings.host_key_alias),
        "files": [*settings.known_hosts_list(), *settings.global_known_hosts],
        "unknown_or_changed_key": "refused (proofbot checks host keys always: StrictHostKeyChecking yes)",
        "check_host_ip": False,
        "revoked": "an @revoked line in any of the files refuses the key (or the CA)",
        "cert_authority": "@cert-authority lines whose pattern matches looked_up_as",
    }


def _hop(hop: Hop) -> dict[str, Any]:
    return {"name": hop.name, "address": hop.address, "port": hop.port, "user": hop.ssh.user,
            "identity_files": list(hop.ssh.client_keys), "certificates": list(hop.ssh.client_certs),
            "known_hosts": hop.ssh.known_hosts_list(), "global_known_hosts": list(hop.ssh.global_known_hosts),
            "host_key_alias": hop.ssh.host_key_alias, "trust": trust(hop.ssh, hop.address, hop.port)}


def describe(host: Host) -> dict[str, Any]:
    """Each resolved value with its origin (file:line, the inventory key, or a default)."""
    settings, origins = host.ssh, host.origins

    def origin(key: str) -> str:
        return origins.get(key, "default")

    shown: dict[str, Any] = {
        "address": _value(host.address, origin("address")),
        "port": _value(host.port, origin("port")),
        "user": _value(settings.user, origin("user")),
        "identity_files": _value(list(settings.client_keys), origin("client_keys")),
        "certificates": _value(list(settings.client_certs), origin("client_certs")),
        "known_hosts": _value(settings.known_hosts_list(), origin("known_hosts")),
        "global_known_hosts": _value(list(settings.global_known_hosts), origin("global_known_hosts")),
        "host_key_alias": _value(settings.host_key_alias, origins.get("host_key_alias", "none")),
        "jump": _value([_hop(hop) for hop in settings.jump], origins.get("jump", "none")),
        "agent": _value(settings.agent, origin("agent")),
        "ssh_config": _value(settings.config, origins.get("config", "none")),
        "not_taken": _value(origins["ignored"].split("; ") if "ignored" in origins else [],
                            "options of the ssh config that change nothing proofbot does"),
    }
    return {"host": host.name, "ssh": shown, "trust": trust(settings, host.address, host.port)}
