"""The inventory keys of a service run as a container (``manager: docker`` or ``podman``): ``container:``,
``engine:`` (the engine's CLI and/or its socket) and ``min_uptime_s``; ``manager: compose``: ``project:``,
``service:`` and ``compose_file:`` (what ``docker-compose restart`` reads); and which keys go with which manager."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from commands.inventory.schema import model
from commands.inventory.settings import Strict, absolute_path, matching

if TYPE_CHECKING:
    from commands.inventory.hosts import Service

CONTAINER_MANAGERS = ("docker", "podman", "compose")
CONTAINER_KEYS = ("container", "engine", "min_uptime_s", "project", "service", "compose_file")
COMPOSE_KEYS = ("project", "service", "compose_file")


def in_container(service: Service | None) -> bool:
    """Whether a service's files are read inside its container (a container manager's)."""
    return service is not None and service.manager in CONTAINER_MANAGERS
# docker-compose 1.29 normalises a project name to these characters (cli/command.py normalize_name) and takes a
# service name of these (config/config_schema); bounded.
COMPOSE_PROJECT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
COMPOSE_SERVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# Docker's own rule for a container name (daemon/names.go), bounded.
CONTAINER_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DEFAULT_CLIS = {"docker": "docker", "podman": "podman"}  # a manager's CLI when `engine:` names none
_SOCKET = re.compile(r"^unix:///[^\s\x00]+$")


@model
class Engine(Strict):
    """The container engine on the host: its CLI (default ``docker``, or ``podman`` for ``manager: podman``, on
    the SSH user's PATH) and the daemon's socket (default: the CLI's own, DOCKER_HOST or /var/run/docker.sock;
    Podman's CLI is the engine itself, ``-H`` makes it a remote client). ``engine: /usr/bin/docker`` and
    ``engine: unix:///run/docker.sock`` are short for one of them."""

    cli: str = "docker"
    host: str | None = None
    compose: str = "docker-compose"  # compose v1's CLI (manager: compose); v2's `docker compose` is not packaged

    @classmethod
    def prepare(cls, raw: Any) -> Any:
        if isinstance(raw, str):
            return {"host": raw} if raw.startswith("unix://") else {"cli": raw}
        return raw

    def argv(self) -> list[str]:
        """The CLI and its daemon, before a subcommand."""
        return [self.cli, *(["-H", self.host] if self.host else [])]


Engine.checks = {
    "cli": (lambda value, _: value if value in DEFAULT_CLIS.values() else absolute_path(value),),
    "compose": (lambda value, _: value if value == "docker-compose" else absolute_path(value),),
    "host": (lambda value, _: None if value is None else matching(_SOCKET, value, "not a unix:///PATH socket"),),
}


def cli_written(engine: Any) -> bool:
    """Whether ``engine:`` as written names the CLI (``engine: /usr/bin/podman`` or ``{cli: …}``)."""
    if isinstance(engine, str):
        return not engine.startswith("unix://")
    if isinstance(engine, Engine):  # built in code: a CLI other than the default was chosen
        return engine.cli != "docker"
    return isinstance(engine, dict) and "cli" in engine


def engine_for(manager: str, engine: Engine | None, cli_chosen: bool = False) -> Engine | None:
    """The service's engine with its manager's CLI when `engine:` names none (Podman's is ``podman``)."""
    cli = DEFAULT_CLIS.get(manager)
    if cli is None or cli == "docker":
        return engine  # docker's (and compose's) is the model's own default
    engine = engine or Engine()
    if cli_chosen:
        return engine
    return engine.model_copy(update={"cli": cli})


def container_problem(manager: str, container: str | None, unit_written: bool, written: set[str]) -> str | None:
    """What is wrong with the service's naming keys for its manager, or None."""
    if manager == "compose":
        return _compose_problem(container, unit_written, written)
    if compose := [f"`{key}`" for key in COMPOSE_KEYS if key in written]:
        if manager in CONTAINER_MANAGERS:
            return f"{', '.join(compose)}: only for manager compose, not {manager}"
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


def _compose_problem(container: str | None, unit_written: bool, written: set[str]) -> str | None:
    missing = [f"`{key}:`" for key in ("project", "service") if key not in written]
    if missing:
        return (f"manager compose needs {' and '.join(missing)} (the compose project and service; the container is "
                "found by their labels)")
    if container is not None or unit_written:
        return "manager compose finds its container by `project:` and `service:`, not by `container:` or `unit:`"
    return None
