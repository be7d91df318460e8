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


def test_compose_service_loads_named_by_project_and_service() -> None:
    text = _service("      manager: compose\n      project: llm\n      service: sglang\n"
                    "      compose_file: /srv/llm/docker-compose.yml\n"
                    "      engine: {compose: /usr/bin/docker-compose}\n")
    service = parse_inventory(text, "inventory.yml").host("ct129").service
    assert service is not None and service.engine is not None
    assert (service.manager, service.project, service.service, service.unit) == ("compose", "llm", "sglang",
                                                                                 "llm/sglang")
    assert (service.compose_file, service.engine.compose, service.container) == (
        "/srv/llm/docker-compose.yml", "/usr/bin/docker-compose", None)


@pytest.mark.parametrize(("body", "line", "key", "words"), [
    ("      manager: compose\n      project: llm\n", 4, "hosts.ct129.service", "needs `service:`"),
    ("      manager: compose\n", 4, "hosts.ct129.service", "needs `project:` and `service:`"),
    ("      manager: compose\n      project: llm\n      service: s\n      container: s\n", 4,
     "hosts.ct129.service", "not by `container:` or `unit:`"),
    ("      manager: compose\n      project: LLM\n      service: s\n", 6, "hosts.ct129.service.project",
     "not a compose project name"),
    ("      manager: compose\n      project: llm\n      service: 'a b'\n", 7, "hosts.ct129.service.service",
     "not a compose service name"),
    ("      manager: compose\n      project: llm\n      service: s\n      compose_file: x.yml\n", 8,
     "hosts.ct129.service.compose_file", "absolute path"),
    ("      manager: docker\n      container: s\n      project: llm\n", 4, "hosts.ct129.service",
     "`project`: only for manager compose, not docker"),
    ("      manager: systemd\n      unit: s\n      compose_file: /x.yml\n", 4, "hosts.ct129.service",
     "`compose_file`: only for a container manager"),
])
def test_compose_mistakes_are_said_at_their_line(body: str, line: int, key: str, words: str) -> None:
    message = _problems(_service(body))
    assert re.search(rf"^inventory\.yml:{line}: {re.escape(key)}: .*{re.escape(words)}", message, re.M), message


def test_every_problem_at_once() -> None:
    text = HEAD + "      manager: docker\n      container: 'bad name'\n      engine: relative\n" + HEALTH
    message = _problems(text)
    assert "service.container: not a valid container name" in message
    assert "service.engine.cli: must be an absolute path" in message


def test_restart_of_a_compose_service_without_its_file_is_refused_before_connecting() -> None:
    """docker-compose 1.29's restart loads the project's file: without compose_file it cannot run, so it is
    refused before anything is read (10.1.230.172 is never connected to)."""
    import asyncio

    from commands.errors import UsageError
    from commands.restart.plan import plan_restart

    host = parse_inventory(_service("      manager: compose\n      project: llm\n      service: sglang\n"),
                           "i.yml").host("ct129")
    with pytest.raises(UsageError, match=re.escape("docker-compose 1.29's restart reads the project's compose file")):
        asyncio.run(plan_restart(host))
