"""The ownership guard of what a compose restart runs and reads as the SSH user (root, usually): ``docker-compose``
(a Python script in 1.29: its interpreter and where it imports from too), the compose file and the ``.env`` beside
it when there is one, by ``owner_guard``'s rule (``engine_guard`` applies the same rule again at the act). Run in
the batch that reads the plan's state (no extra round trip); a refusal names the path, its owner and its mode."""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence

from commands.checks.owner_guard import FUNCTIONS, UNSET_PYTHON
from commands.command_result import CommandResult
from commands.inventory import Service
from commands.inventory.containers import Engine

PREFIX = "proofbot-compose-guard: "


def guarded_paths(service: Service) -> list[str]:
    """What a compose restart runs and reads besides the engine's CLI: ``docker-compose`` and the compose file."""
    engine = service.engine or Engine()
    return [engine.compose, *([service.compose_file] if service.compose_file is not None else [])]


def optional_paths(service: Service) -> list[str]:
    """What docker-compose reads when it is there: the ``.env`` of the project dir (the compose file's)."""
    return [] if service.compose_file is None else [posixpath.join(posixpath.dirname(service.compose_file), ".env")]


def guard_script(paths: Sequence[str], optional: Sequence[str] = ()) -> str:
    """Shell text: the guard's functions, then ``pb_why`` empty when every path passed, else why not. ``paths[0]``
    is what runs (a ``#!`` script's interpreter and imports judged too); ``optional``: judged when there."""
    paths = list(paths)
    python = f" && pb_python {shlex.quote(paths[0])}" if paths else ""
    guard = f"pb_ids; pb_guard {shlex.join(paths)}{python} && pb_maybe {shlex.join(optional)}"
    return f"{FUNCTIONS}{UNSET_PYTHON}\npb_why=$({{ {guard}; }} 2>&1 | head -c 1000)"


def guarded_command(command: str) -> str:
    """Shell text that runs ``command`` only when the guard (``guard_script``, run before it in the same shell)
    passed; else prints the refusal and exits 1."""
    return (f"if [ -z \"$pb_why\" ]; then {command}\n"
            f"else printf '{PREFIX}refused: %s: nothing run\\n' \"$pb_why\"; false; fi")


def guard_argv(paths: Sequence[str], optional: Sequence[str] = ()) -> list[str]:
    """The guard as one argv (a restart plan's read of what the act will run): exit 1 and the refusal, or 0."""
    return ["sh", "-c", guard_script(paths, optional) + "\n" + guarded_command("true"), "proofbot-guard"]


def refusal(result: CommandResult) -> str | None:
    """The guard's reason when it refused (pure); None when it did not."""
    for line in result.text.splitlines():
        if line.startswith(PREFIX + "refused: "):
            return line[len(PREFIX + "refused: "):]
    return None
