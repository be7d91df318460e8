"""manifest.yml names exactly the slash commands the app registers, with Socket Mode on."""

from __future__ import annotations

from pathlib import Path

import yaml

from commands.registry import OPERATIONS

MANIFEST = Path(__file__).resolve().parent.parent / "manifest.yml"


def test_manifest_commands_match_registry_and_app(tmp_path: Path) -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    in_manifest = {command["command"] for command in manifest["features"]["slash_commands"]}
    assert in_manifest == {f"/{spec.name}" for spec in OPERATIONS}
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert {"commands", "chat:write"} <= set(manifest["oauth_config"]["scopes"]["bot"])
