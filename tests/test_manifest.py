"""manifest.yml, the operation registry, the CLI and the listeners the bolt app really has agree.

Checked by behaviour, not by reading lists: every manifest command and every button the
renderers emit reaches a listener of the real app (signed requests over HTTP); anything
else is unhandled (bolt's 404).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
import yaml

import bot.slack
from bot.cli.main import build_parser
from bot.slack.app import COMMANDS, build_app
from bot.slack.listening import BotContext
from commands.inventory import parse_inventory
from commands.registry import OPERATIONS
from commands.store.db import AuditStore
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import FORM_CONTENT_TYPE, block_actions_body, sign, slash_command_body
from tests.source_ast import parse_source

MANIFEST = Path(__file__).resolve().parent.parent / "manifest.yml"
SECRET = "manifest-secret"
CHANNEL = "C0OPS"
INVENTORY = {"hosts": {"ct1": {"address": "127.0.0.1", "port": 9}}}


def manifest_commands() -> set[str]:
    manifest = yaml.safe_load(MANIFEST.read_text())
    return {command["command"] for command in manifest["features"]["slash_commands"]}


def rendered_action_ids() -> set[str]:
    """Every action_id a Block Kit renderer puts on a button (``action_id=CONSTANT``)."""
    found: set[str] = set()
    renderers = sorted(Path(bot.slack.__path__[0]).glob("*blocks.py"))
    assert len(renderers) >= 9  # blocks, thread, restore, restart, rollout, audit, home, modal, fleet
    for path in renderers:
        module = importlib.import_module(f"bot.slack.{path.stem}")
        tree = parse_source(path.read_text())
        names = {kw.value.id for node in ast.walk(tree) if isinstance(node, ast.Call)
                 for kw in node.keywords if kw.arg == "action_id" and isinstance(kw.value, ast.Name)}
        found |= {getattr(module, name) for name in names}
    return found


def test_manifest_commands_match_registry_and_cli() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    assert manifest_commands() == {f"/{spec.name}" for spec in OPERATIONS}
    subcommands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {spec.name for spec in OPERATIONS} <= set(subcommands)
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert {"commands", "chat:write"} <= set(manifest["oauth_config"]["scopes"]["bot"])


def test_the_manifest_commands_texts_are_the_registrys() -> None:
    """manifest.yml's slash commands are written by scripts/manifest.py from the registry: the committed file is
    what it writes (run as a user would), and each command's description and usage are the registry's."""
    checked = subprocess.run([sys.executable, str(MANIFEST.parent / "scripts" / "manifest.py"), "--check"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    written = {entry["command"]: entry for entry in yaml.safe_load(MANIFEST.read_text())["features"]["slash_commands"]}
    for spec in OPERATIONS:
        assert written[f"/{spec.name}"]["description"] == spec.summary
        assert written[f"/{spec.name}"]["usage_hint"] == f"{spec.usage} | help"


def test_every_rendered_button_belongs_to_a_command() -> None:
    owned = {action for command in COMMANDS.values() for action in command.actions}
    assert rendered_action_ids() == owned and len(owned) >= 6


@pytest_asyncio.fixture(loop_scope="session")
async def app(tmp_path: Path) -> AsyncIterator[tuple[str, FakeSlack]]:
    inventory = parse_inventory(yaml.safe_dump(INVENTORY), "inventory.yml")
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        context = BotContext(inventory, audit)
        app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
        try:
            async with serving(app) as url:
                yield url, slack
        finally:
            for timer in list(context.timers):  # the Home refresher, once app_home_opened came
                timer.cancel()
            audit.close()


async def post(url: str, body: bytes) -> httpx.Response:
    """Straight to the app, not through the fake: what Slack itself would never send."""
    async with httpx.AsyncClient(trust_env=False) as client:
        return await client.post(url, content=body, headers={"Content-Type": FORM_CONTENT_TYPE,
                                                              **sign(body, SECRET)})


def click(action_id: str, response_url: str) -> bytes:
    return block_actions_body({
        "type": "block_actions", "user": {"id": "U0ALICE"}, "api_app_id": "A0", "token": "t", "trigger_id": "t",
        "team": {"id": "T0TEST"}, "container": {"type": "message", "message_ts": "1.1", "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": "1.1"}, "response_url": response_url,
        "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": "op-none",
                     "action_ts": "1"}]})


async def test_the_app_answers_exactly_the_manifest_commands(app: tuple[str, FakeSlack]) -> None:
    app_url, slack = app
    for command in sorted(manifest_commands()):
        ack = await slack.deliver(app_url, slash_command_body(command, "help", "U0ALICE", CHANNEL,
                                                              slack.response_url(), "t"))
        assert ack.status_code == 200, command
        assert "Known hosts: `ct1`" in ack.json()["text"], command
    unknown = await post(app_url, slash_command_body("/reboot", "ct1", "U0ALICE", CHANNEL, slack.response_url(), "t"))
    assert unknown.status_code == 404


async def test_the_app_answers_exactly_the_rendered_buttons(app: tuple[str, FakeSlack]) -> None:
    app_url, slack = app
    for action_id in sorted(rendered_action_ids()):
        ack = await slack.deliver(app_url, click(action_id, slack.response_url()))
        assert ack.status_code == 200, action_id  # a listener took it (and refused the unknown plan)
    assert (await post(app_url, click("delete_everything", slack.response_url()))).status_code == 404


async def test_the_app_answers_exactly_the_manifest_events(app: tuple[str, FakeSlack]) -> None:
    app_url, slack = app
    manifest = yaml.safe_load(MANIFEST.read_text())
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    for kind in events:
        ack = await slack.deliver_event(app_url, {"type": kind, "user": "U0ALICE", "channel": CHANNEL, "tab": "home"})
        assert ack.status_code == 200, kind
    await slack.wait_for("views.publish")  # app_home_opened was really handled
    unsubscribed = json.dumps({"type": "event_callback", "team_id": "T0TEST", "api_app_id": "A0",
                               "event": {"type": "reaction_added", "user": "U0ALICE"}}).encode()
    async with httpx.AsyncClient(trust_env=False) as client:
        answer = await client.post(app_url, content=unsubscribed, headers={"Content-Type": "application/json",
                                                                          **sign(unsubscribed, SECRET)})
    assert answer.status_code == 404
