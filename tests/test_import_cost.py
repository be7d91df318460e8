"""Tier 1: what `proofbot verify` loads before it connects (start-up is most of a one-host verify's time).

The figures are bench/fleet_bench.py's; here only which code a verify's start-up loads: not
the Slack stack, not restart or restore, and neither httpx, detect-secrets nor sqlite-utils
before SSH connects (worker threads load them while the handshake is in flight).
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

NOT_FOR_VERIFY = ("slack_bolt", "slack_sdk", "aiohttp", "commands.restart", "commands.restore", "httpx",
                  "commands.host_http", "detect_secrets", "sqlite_utils")


def loaded_by(code: str) -> set[str]:
    run = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
                         cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    return set(run.stdout.split())


def test_the_cli_starts_without_slack_restart_restore_httpx_detect_secrets_or_sqlite_utils() -> None:
    loaded = loaded_by("import bot.cli.main\nbot.cli.main.build_parser()")
    assert "commands.verify" in loaded and "asyncssh" in loaded  # what verify does need
    assert sorted(name for name in NOT_FOR_VERIFY if name in loaded) == []


def test_restart_still_loads_what_it_needs_when_it_runs() -> None:
    loaded = loaded_by("import bot.cli.main\nfrom commands.restart import restart")
    assert {"commands.restart", "commands.host_http", "httpx"} <= loaded
