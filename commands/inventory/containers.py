"""The inventory keys of a service run as a container (``manager: docker`` or ``podman``): ``container:``,
``engine:`` (the engine's CLI and/or its socket) and ``min_uptime_s``, and which keys go with which manager."""

from __future__ import annotations

import re
from typing import Any

from pydantic import field_validator, model_validator

from commands.inventory.settings import Strict, absolute_path, matching

CONTAINER_MANAGERS = ("docker", "podman")
CONTAINER_KEYS = ("container", "engine", "min_uptime_s")
# Docker's own rule for a container name (daemon/names.go), bounded.
CONTAINER_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DEFAULT_CLIS = {"docker": "docker", "podman": "podman"}  # a manager's CLI when `engine:` names none
_SOCKET = re.compile(r"^unix:///[^\s\x00]+$")


class Engine(Strict):
    """The container engine on the host: its CLI (default ``docker``, or ``podman`` for ``manager: podman``, on
    the SSH user's PATH) and the daemon's socket (default: the CLI's own, DOCKER_HOST or /var/run/docker.sock;
    Podman's CLI is the engine itself, ``-H`` makes it a remote client). ``engine: /usr/bin/docker`` and
    ``engine: unix:///run/docker.sock`` are short for one of them."""

    cli: str = "docker"
    host: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"host": value} if value.startswith("unix://") else {"cli": value}
        return value

    @field_validator("cli")
    @classmethod
    def _cli(cls, value: str) -> str:
        return value if value in DEFAULT_CLIS.values() else absolute_path(value)

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        return None if value is None else matching(_SOCKET, value, "not a unix:///PATH socket")

    def argv(self) -> list[str]:
        """The CLI and its daemon, before a subcommand."""
        return [self.cli, *(["-H", self.host] if self.host else [])]


def engine_for(manager: str, engine: Engine | None) -> Engine | None:
    """The service's engine with its manager's CLI when `engine:` names none (Podman's is ``podman``)."""
    if manager not in CONTAINER_MANAGERS or DEFAULT_CLIS[manager] == Engine.model_fields["cli"].default:
        return engine  # docker's is the model's own default
    engine = engine or Engine()
    if "cli" in engine.model_fields_set:
        return engine
    return engine.model_copy(update={"cli": DEFAULT_CLIS[manager]})


def container_problem(manager: str, container: str | None, unit_written: bool, written: set[str]) -> str | None:
    """What is wrong with the service's naming keys for its manager, or None."""
    if manager in CONTAINER_MANAGERS:
        if container is None:
            return f"manager {manager} needs `container: NAME` (the container's name)" + (
                ", not `unit:`" if unit_written else "")
        if unit_written:
            return f"manager {manager} names its service by `container:`; `unit:` is for systemd and supervisord"
        return None
    if written:
        keys = ", ".join(f"`{key}`" for key in CONTAINER_KEYS if key in written)
        return f"{keys}: only for a container manager ({', '.join(CONTAINER_MANAGERS)}), not {manager}"
    if not unit_written:
        return f"manager {manager} needs `unit:` (the {'unit' if manager == 'systemd' else 'program'} name)"
    return None
