"""Tier 1: what `proofbot verify` loads before it connects (start-up is most of a one-host verify's time).

The figures are bench/fleet_bench.py's; here only which code a verify's start-up loads: not
the Slack stack, not restart or restore, and not the checks' parsers, the renderer, h11,
detect-secrets or sqlite-utils before SSH connects (a worker thread loads them while the
handshake started ahead is in flight).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import build_parser
from commands.errors import UsageError
from commands.store.db import AuditStore
from tests.conftest import REPO, write_inventory

# Loaded while the handshake is in flight (bot.cli.verify RUNNING_PARTS, the audit log, redaction, HTTP), or never.
NOT_BEFORE_CONNECTING = ("slack_bolt", "slack_sdk", "aiohttp", "commands.restart", "commands.restore", "httpx", "h11",
                         "commands.host_http", "detect_secrets", "sqlite_utils", "commands.verify.operation",
                         "bot.cli.results_text", "bot.words", "commands.store.db",
                         "commands.store.events")


def loaded_by(code: str) -> set[str]:
    run = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
                         cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    return set(run.stdout.split())


def test_a_verify_connects_before_loading_the_audit_log_the_checks_or_the_renderer() -> None:
    loaded = loaded_by("import bot.cli.main\nbot.cli.main.build_parser()\nbot.cli.main.cli_command('verify')")
    assert {"commands.verify.plan", "commands.ssh", "asyncssh"} <= loaded  # what connecting needs
    assert sorted(name for name in NOT_BEFORE_CONNECTING if name in loaded) == []


def test_restart_still_loads_what_it_needs_when_it_runs() -> None:
    loaded = loaded_by("import bot.cli.main\nfrom commands.restart import restart")
    assert {"commands.restart", "commands.host_http", "h11"} <= loaded


# What a running verify (redaction's patterns compiled, HTTP ready, an inventory's models built) has no use for:
# restart and restore; detect-secrets and its `requests` (commands.secret_shapes has the patterns); rich and
# pygments; pydantic (the inventory is validated by commands/inventory/schema.py); sqlite-utils and its click, pluggy,
# dateutil and sqlite-fts4 (the stdlib's sqlite3 writes the audit log: commands/store/lite.py); an HTTP client's
# machinery (h11 speaks plain http over the channel: no httpx, httpcore, cookie jar or idna; anyio, certifi and the TLS
# module load only for an https URL); the ssh config's reader (an inventory without ``ssh.config`` reads none),
# zoneinfo (only quiet hours written in `watch:` need it); the inventory's watch and policies (none written); of the
# store, on a SQLite file already migrated, only what writes its events: not PostgreSQL's backend, the migrations,
# the leases, the kinds a verify never writes, the trail's reader or the schema.
NEVER_FOR_A_VERIFY = ("commands.restart", "commands.restore", "detect_secrets", "requests", "urllib3", "rich",
                      "pygments", "pydantic", "pydantic_core", "sqlite_utils", "click", "dateutil", "pluggy",
                      "sqlite_fts4", "httpx", "httpcore", "anyio", "certifi", "idna", "http.cookiejar",
                      "commands.host_tls", "commands.ssh_config.evaluate", "commands.ssh_config.resolve",
                      "commands.ssh_config.lexer", "commands.ssh_config.tokens", "commands.ssh_config.keywords",
                      "commands.ssh_config.patterns", "zoneinfo", "commands.inventory.watch",
                      "commands.inventory.policies", "commands.store.pg", "psycopg", "commands.store.migrations",
                      "commands.store.leases", "commands.store.kinds_other", "commands.store.trail",
                      "commands.store.schema")
# A verify's writes to an audit DB already migrated: its request, a batch of checks, its ending.
WRITES = """
import asyncio
from commands.findings import Evidence, Finding
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.store.kinds import Finished
from commands.store.log import audit_log
async def write(path):
    store = AuditStore.open(path)
    try:
        log = audit_log(store, 'verify', 'op-1', 'ct129', 'root')
        await log.requested(Origin(actor='root', via='cli'), checks=['health'])
        await log.checks([Finding('health', 'pass', 'ok', Evidence('true', 0, '', 0.01))])
        await log.finished(Finished('pass'))
    finally:
        store.close()
"""


def test_a_verify_running_loads_no_restart_restore_secret_scanner_http_cli_pydantic_or_sqlite_utils(
        tmp_path: Path) -> None:
    """Once running too (its parts, the checks' parsers, next steps, HTTP, redaction and the audit log written), a
    verify loads only what it uses: imports it has no use for cost every cold process CPU."""
    db = tmp_path / "audit.db"
    AuditStore.open(db).close()  # migrated, as every database but a new one is
    loaded = loaded_by(f"{WRITES}\nasyncio.run(write({str(db)!r}))\n"
                       "import bot.cli.main, importlib, sys\nfrom bot.cli.verify import RUNNING_PARTS\n"
                       "[importlib.import_module(part) for part in RUNNING_PARTS]\n"
                       "import commands.verify.next_steps, commands.host_http, commands.store.log, commands.redact\n"
                       "import commands.checks.managers, commands.inventory\n"
                       "commands.inventory.parse_inventory('hosts: {h1: {address: 127.0.0.1}}', 'inventory.yml')\n"
                       "assert commands.redact.redact('k: AKIAABCDEFGHIJKLMNOP') == 'k: [REDACTED]'")
    assert {"commands.verify.operation", "commands.verify.next_steps", "h11", "commands.redact"} <= loaded
    assert sorted(name for name in NEVER_FOR_A_VERIFY if name in loaded) == []


# A container's checks (engine, compose, their guards and state parsers, the in-container probe) and the packages'.
CONTAINER_AND_PACKAGE_CHECKS = ("commands.checks.container_files", "commands.checks.container_probe",
                                "commands.checks.docker", "commands.checks.docker_state", "commands.checks.compose",
                                "commands.checks.engine_guard", "commands.checks.owner_guard",
                                "commands.checks.package", "commands.checks.package_probe", "commands.checks.deb")
PLANNED = """
from commands.inventory import parse_inventory
from commands.verify.plan import VerifyPlan
service = {"health_url": "http://127.0.0.1:1/health", "probe": {"url": "http://127.0.0.1:1/p"}}
host = {"address": "127.0.0.1", "service": {**service, %s},
        "backups": {"b": {"dir": "/srv/b", "files": {"a.py": "/srv/a.py"}, "watch": ["/srv"]}}}
inventory = parse_inventory(repr({"hosts": {"h1": host}}), "inventory.yml")
plan = VerifyPlan.for_host(inventory.host("h1"), "b")
print(plan.check_names(), plan.facts())
"""


def test_a_verify_loads_container_and_package_checks_only_for_a_host_that_has_them() -> None:
    supervised = loaded_by(PLANNED % '"manager": "supervisord", "unit": "sglang"')
    containers = loaded_by(PLANNED % '"manager": "docker", "container": "sglang"')
    assert sorted(name for name in CONTAINER_AND_PACKAGE_CHECKS if name in supervised) == []
    assert {"commands.checks.container_files", "commands.checks.docker", "commands.checks.compose"} <= containers


# The CLI process as the `proofbot` script starts it: records whether the cyclic GC runs (and over what) when each
# command's work begins; serve's own loop and a verify's session are replaced by recorders, nothing connects.
GC_SEEN = """
import gc, json, sys
sys.argv[0] = "/usr/local/bin/proofbot"
import bot.cli.main, bot.cli.session, bot.slack.serve
seen = {"while starting": gc.isenabled()}
async def serving(*args, **kwargs):
    seen["serve"] = [gc.isenabled(), gc.get_freeze_count()]
    return 0
async def refused(self, *args):
    seen["verify"] = [gc.isenabled(), gc.get_freeze_count()]
bot.slack.serve.serve, bot.cli.session.Session.refused = serving, refused
bot.cli.main.main(["serve" if sys.argv[1] == "serve" else "verify", "--inventory", sys.argv[2], "--db", sys.argv[3],
                   *(["h1"] if sys.argv[1] == "verify" else [])])
print(json.dumps(seen))
"""


def gc_seen(command: str, tmp_path: Path) -> dict[str, object]:
    inventory = write_inventory(tmp_path / "inventory.yml", {"hosts": {"h1": {"address": "127.0.0.1"}}})
    run = subprocess.run([sys.executable, "-c", GC_SEEN, command, str(inventory), str(tmp_path / "audit.db")],
                         cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    seen: dict[str, object] = json.loads(run.stdout.splitlines()[-1])
    return seen


def test_the_cli_starts_without_the_cyclic_gc_and_runs_its_command_with_it(tmp_path: Path) -> None:
    """A command starts (its ~600 modules, its inventory) with the GC off, then works with it on, over only what
    it makes from then on (the start-up's objects frozen); serve, which runs for months, over everything."""
    verify, serve = gc_seen("verify", tmp_path), gc_seen("serve", tmp_path)
    assert verify["while starting"] is False and serve["while starting"] is False
    enabled, frozen = verify["verify"]  # type: ignore[misc]
    assert enabled is True and frozen > 10_000
    assert serve["serve"] == [True, 0]


def test_importing_the_cli_elsewhere_leaves_the_cyclic_gc_alone() -> None:
    """Tests and other programs that import bot.cli (not the `proofbot` process) keep their GC running."""
    assert "enabled True" in subprocess.run(
        [sys.executable, "-c", "import gc, bot.cli.main\nprint('enabled', gc.isenabled())"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True).stdout


# Each registry operation with a few command lines as users write them (and one its parser refuses).
COMMAND_LINES = {"verify": [["all", "--json"], ["ct129", "ct130", "--backup", "b", "--no-probe", "-v", "--strict"], []],
                 "restore": [["ct129", "b", "--yes", "--move-extras"], ["ct129", "--undo", "/srv/snap"], []],
                 "restart": [["gpu-west", "--yes", "--json"], []],
                 "audit": [["ct129", "--limit", "5"], ["verify", "--anchor", "3:ab"], ["--limit", "0"]],
                 "policy": [["ct129", "--json"], ["a", "b"]]}


def outcome_of(parser: argparse.ArgumentParser, words: list[str]) -> object:
    try:
        return vars(parser.parse_args(words))
    except UsageError as exc:
        return exc.message, exc.hint


def test_a_command_named_first_builds_only_its_own_parser_which_reads_and_helps_as_the_whole_one() -> None:
    """`proofbot verify …` builds the verify parser alone (the rest of the CLI's parser is start-up CPU it has no use
    for); what it parses, refuses and prints as help is the whole parser's, word for word."""
    for name, lines in COMMAND_LINES.items():
        alone, whole = build_parser(name), build_parser()
        assert list(_subcommands(alone)) == [name] and name in _subcommands(whole)
        for words in lines:
            line = [name, "--inventory", "i.yml", *words]
            assert outcome_of(alone, line) == outcome_of(whole, line), line
        assert _subcommands(alone)[name].format_help() == _subcommands(whole)[name].format_help()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [each for each in parser._actions if isinstance(each, argparse._SubParsersAction)]
    return dict(action.choices)


def test_a_check_class_that_adds_no_field_is_as_frozen_equal_and_shown_as_a_full_dataclass() -> None:
    """Declared with init/repr/eq left to its parent (one compile each fewer at import), it still builds, reads,
    compares, hashes and refuses any assignment as one whose dataclass methods are all its own."""
    from commands.checks.compose import ComposeMainPid
    from commands.checks.docker import DockerHealthCheck, DockerMainPid, DockerStaleCheck, PodmanMainPid
    from commands.checks.service import SupervisordMainPid, SystemdMainPid

    for lean in (SystemdMainPid, SupervisordMainPid, DockerMainPid, PodmanMainPid, ComposeMainPid, DockerStaleCheck,
                 DockerHealthCheck):
        [parent] = [base for base in lean.__mro__[1:] if dataclasses.is_dataclass(base)][:1]
        full = dataclasses.dataclass(frozen=True)(type(f"Full{lean.__name__}", (lean,), {}))
        assert [f.name for f in dataclasses.fields(lean)] == [f.name for f in dataclasses.fields(parent)]
        values = {f.name: f"v-{f.name}" for f in dataclasses.fields(lean)}
        one, same, full_one = lean(**values), lean(**values), full(**values)
        assert one == same and hash(one) == hash(same) and one != full_one  # another class: never equal
        assert repr(one) == repr(full_one).replace(f"Full{lean.__name__}", lean.__name__)
        assert dataclasses.replace(one) == one
        for name in (*values, "anything"):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(one, name, 1)


WATCHED = """
import sys
from commands.inventory import parse_inventory
from commands.inventory.schema import specs
plain = parse_inventory("hosts: {h1: {address: 127.0.0.1}}", "inventory.yml")
assert not {"commands.inventory.watch", "commands.inventory.policies"} & set(sys.modules), sys.modules
watched = parse_inventory(
    "hosts: {h1: {address: 127.0.0.1}}\\n"
    "watch: [{target: h1, every: 5m, channel: C0123ABCD, quiet: '22:00-07:00 Europe/Berlin'}]\\n"
    "policies: [{targets: [h1], operations: [restart], approvers: [U1]}]", "inventory.yml")
print(watched.watch[0].target, watched.policies[0].approvers, plain.policy("restart", ["h1"]).index,
      watched.policy("restart", ["h1"]).index, [str(spec.hint) for spec in specs(type(plain))][-1])
"""


def test_an_inventory_loads_watch_and_policies_only_when_it_writes_them() -> None:
    """Without ``watch:`` or ``policies:`` neither module loads; written, both read as ever (the Inventory's
    annotations of them resolve through Model.imported)."""
    run = subprocess.run([sys.executable, "-c", WATCHED], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=True)
    assert run.stdout.split() == ["h1", "['U1']", "0", "0", "tuple[commands.inventory.watch.WatchEntry,", "...]"]


# A host's ordinary output: no gate opens but the always-run rules' (a base64 line, Discord's bot token).
COMPILED_BY_REDACTING = """
import json
from commands import redact
from commands.secret_shapes import DETECTOR_PATTERNS
from commands.lazy_pattern import LazyPattern
assert redact.redact('sglang.service - SGLang\\n   Active: active (running) since Tue').startswith('sglang')
rules = [name for name, value in vars(redact).items() if isinstance(value, LazyPattern) and value._compiled]
shapes = [plugin for (plugin, _p, _f), (p, _g) in zip(DETECTOR_PATTERNS, redact._detector_patterns()) if p._compiled]
print(json.dumps([sorted(rules), shapes]))
"""


def test_redaction_compiles_only_the_patterns_a_text_reaches() -> None:
    """Importing commands.redact compiles none of its ~70 patterns; redacting a text with no secret-looking word
    compiles the two that always run (issue 27: compiling is Python code, ~5 ms for what a verify reaches)."""
    run = subprocess.run([sys.executable, "-c", COMPILED_BY_REDACTING], cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True)
    assert json.loads(run.stdout) == [["_BASE64_LINE"], ["DiscordBotTokenDetector"]]
