"""Write manifest.yml's slash commands from the operation registry (commands/registry.py), the one home of their texts.

    .venv/bin/python scripts/manifest.py          rewrite the slash_commands block of manifest.yml
    .venv/bin/python scripts/manifest.py --check  exit 1, saying what differs, if the committed file is not that

Only the block between ``  slash_commands:`` and the next top-level key is generated; the rest of the file
(scopes, events, their comments) is written by hand.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from commands.registry import OPERATIONS  # the repository's root first on sys.path, above

MANIFEST = Path(__file__).resolve().parent.parent / "manifest.yml"
START = "  slash_commands:\n"
END = "oauth_config:\n"


def slash_commands() -> str:
    """The block as YAML: each operation's name, summary and usage (every command also answers `help`)."""
    lines = [START, "    # written by scripts/manifest.py from commands/registry.py: edit the registry, then run it\n"]
    for spec in OPERATIONS:
        lines += [f"    - command: /{spec.name}\n",
                  f"      description: {json.dumps(spec.summary, ensure_ascii=False)}\n",
                  f"      usage_hint: {json.dumps(spec.usage + ' | help', ensure_ascii=False)}\n",
                  "      should_escape: false\n"]
    return "".join(lines)


def generated(text: str) -> str:
    """text (manifest.yml) with its slash_commands block replaced by the registry's."""
    start = text.index(START)
    end = text.index(END, start)
    return text[:start] + slash_commands() + text[end:]


def main(argv: list[str]) -> int:
    text = MANIFEST.read_text(encoding="utf-8")
    wanted = generated(text)
    if argv[1:] == ["--check"]:
        if text == wanted:
            return 0
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), wanted.splitlines(True),
                                                   "manifest.yml", "manifest.yml (from commands/registry.py)"))
        print("manifest.yml is not what scripts/manifest.py writes: run it", file=sys.stderr)
        return 1
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    MANIFEST.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
