"""Inventory keys of a container service (``manager: docker``): ``container``, ``engine``, ``min_uptime_s``,
each mistake said at its line, and `inventory check`'s typo hint naming them."""

from __future__ import annotations

import re

import pytest

from commands.errors import InventoryError
from commands.inventory import parse_inventory

HEAD = """hosts:
  ct129:
    address: 10.1.230.172
    service:
"""
HEALTH = "      health_url: http://127.0.0.1:30000/health\n"


def _service(body: str) -> str:
    return HEAD + body + HEALTH


def _problems(text: str) -> str:
    with pytest.raises(InventoryError) as raised:
        parse_inventory(text, "inventory.yml")
    return str(raised.value)


def test_docker_service_loads_with_its_defaults() -> None:
    service = parse_inventory(_service("      manager: docker\n      container: sglang\n"),
                              "inventory.yml").host("ct129").service
    assert service is not None
    assert (service.manager, service.container, service.unit) == ("docker", "sglang", "sglang")
    assert service.min_uptime_s == 10 and service.engine is None


@pytest.mark.parametrize(("written", "cli", "host"), [
    ("/usr/bin/docker", "/usr/bin/docker", None),
    ("unix:///var/tmp/d/sock", "docker", "unix:///var/tmp/d/sock"),
    ("{cli: /usr/bin/docker, host: 'unix:///run/d.sock'}", "/usr/bin/docker", "unix:///run/d.sock"),
])
def test_engine_names_the_cli_or_the_socket_or_both(written: str, cli: str, host: str | None) -> None:
    text = _service(f"      manager: docker\n      container: sglang\n      engine: {written}\n"
                    "      min_uptime_s: 3\n")
    service = parse_inventory(text, "inventory.yml").host("ct129").service
    assert service is not None and service.engine is not None
    assert (service.engine.cli, service.engine.host, service.min_uptime_s) == (cli, host, 3)
    assert service.engine.argv() == [cli, *(["-H", host] if host else [])]


@pytest.mark.parametrize(("body", "line", "key", "words"), [
    ("      manager: docker\n", 4, "hosts.ct129.service", "needs `container: NAME`"),
    ("      manager: docker\n      unit: sglang\n", 4, "hosts.ct129.service", "not `unit:`"),
    ("      manager: docker\n      container: sglang\n      unit: sglang\n", 4, "hosts.ct129.service",
     "`unit:` is for systemd"),
    ("      manager: docker\n      container: 'a;reboot'\n", 6, "hosts.ct129.service.container",
     "not a valid container name"),
    ("      manager: docker\n      container: sglang\n      engine: docker-cli\n", 7,
     "hosts.ct129.service.engine.cli", "absolute path"),
    ("      manager: docker\n      container: sglang\n      engine: {host: 'tcp://10.0.0.1:2375'}\n", 7,
     "hosts.ct129.service.engine.host", "unix:///PATH"),
    ("      manager: docker\n      container: sglang\n      min_uptime_s: -1\n", 7,
     "hosts.ct129.service.min_uptime_s", "greater than or equal to 0"),
    ("      manager: systemd\n      unit: sglang\n      container: sglang\n", 4, "hosts.ct129.service",
     "`container`: only for a container manager"),
    ("      manager: systemd\n      unit: sglang\n      min_uptime_s: 5\n", 4, "hosts.ct129.service",
     "`min_uptime_s`: only for a container manager"),
    ("      manager: supervisord\n", 4, "hosts.ct129.service", "needs `unit:` (the program name)"),
    ("      manager: docker\n      containr: sglang\n", 6, "hosts.ct129.service.containr",
     "did you mean `container`?"),
    ("      manager: docker\n      container: sglang\n      min_uptime: 5\n", 7,
     "hosts.ct129.service.min_uptime", "did you mean `min_uptime_s`?"),
    ("      manager: docker\n      container: sglang\n      engine: {sock: 'unix:///x'}\n", 7,
     "hosts.ct129.service.engine.sock", "`cli`, `host`"),
])
def test_mistakes_are_said_at_their_line(body: str, line: int, key: str, words: str) -> None:
    message = _problems(_service(body))
    assert re.search(rf"^inventory\.yml:{line}: {re.escape(key)}: .*{re.escape(words)}", message, re.M), message


def test_every_problem_at_once() -> None:
    text = HEAD + "      manager: docker\n      container: 'bad name'\n      engine: relative\n" + HEALTH
    message = _problems(text)
    assert "service.container: not a valid container name" in message
    assert "service.engine.cli: must be an absolute path" in message


def test_restart_of_a_container_service_is_refused_before_connecting() -> None:
    """Restart is not built for containers yet: never supervisorctl's restart run on a docker host."""
    import asyncio

    from commands.errors import UsageError
    from commands.restart.plan import plan_restart

    host = parse_inventory(_service("      manager: docker\n      container: sglang\n"), "i.yml").host("ct129")
    with pytest.raises(UsageError, match="restart of a docker service is not built yet"):
        asyncio.run(plan_restart(host))  # 10.1.230.172 is never connected to: refused first
