"""Tier 1: what `proofbot verify` loads before it connects (start-up is most of a one-host verify's time).

The figures are bench/fleet_bench.py's; here only which code a verify's start-up loads: not
the Slack stack, not restart or restore, and not the checks' parsers, the renderer, h11,
detect-secrets or sqlite-utils before SSH connects (a worker thread loads them while the
handshake started ahead is in flight).
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

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
# pygments; pydantic's plugin search over every installed distribution; an HTTP client's machinery (h11 speaks
# plain http over the channel: no httpx, httpcore, cookie jar or idna; anyio, certifi and the TLS module load only
# for an https URL).
NEVER_FOR_A_VERIFY = ("commands.restart", "commands.restore", "detect_secrets", "requests", "urllib3", "rich",
                      "pygments", "pydantic_plugins_searched", "httpx", "httpcore", "anyio", "certifi", "idna",
                      "http.cookiejar", "commands.host_tls")


def test_a_verify_running_loads_no_restart_restore_secret_scanner_http_cli_or_plugin_search() -> None:
    """Once running too (its parts, the checks' parsers, next steps, HTTP, redaction and the audit log), a verify
    loads only what it uses: imports it has no use for cost every cold process CPU."""
    loaded = loaded_by("import bot.cli.main, importlib, sys\nfrom bot.cli.verify import RUNNING_PARTS\n"
                       "[importlib.import_module(part) for part in RUNNING_PARTS]\n"
                       "import commands.verify.next_steps, commands.host_http, commands.store.log, commands.redact\n"
                       "import commands.checks.managers, commands.inventory, pydantic.plugin._loader\n"
                       "assert commands.redact.redact('k: AKIAABCDEFGHIJKLMNOP') == 'k: [REDACTED]'\n"
                       "if pydantic.plugin._loader._plugins is not None:\n"
                       "    sys.modules['pydantic_plugins_searched'] = sys")
    assert {"commands.verify.operation", "commands.verify.next_steps", "h11", "commands.redact"} <= loaded
    assert sorted(name for name in NEVER_FOR_A_VERIFY if name in loaded) == []
