"""docs/architecture.md's layout is the tree: every package and top-level module of `commands` and `bot`
is named there, and everything it names exists, so the map a newcomer reads cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "docs" / "architecture.md"
CODE = ("commands", "bot")


def layout_block() -> list[str]:
    text = LAYOUT.read_text(encoding="utf-8")
    block = re.search(r"^# Layout\n+```\n(.*?)\n```", text, re.S | re.M)
    assert block, "docs/architecture.md must open with the layout in one code block"
    return block.group(1).splitlines()


def named_in_layout() -> tuple[set[str], set[str]]:
    """(packages, modules) the layout names, as paths: `commands/verify`, `commands/plans.py`.

    A line indented by two under a top-level package names its subpackages (`verify/`) and modules
    (`plans.py`) before the description column; a wrapped description line names nothing."""
    packages: set[str] = set()
    modules: set[str] = set()
    top = ""
    for line in layout_block():
        head = re.match(r"^(\S+/)\s", line)
        if head:
            top = head.group(1).rstrip("/")
            packages.add(top)
            continue
        entry = re.match(r"^  (\S.*?)(?:\s{2,}|$)", line)
        if not entry or top not in CODE:
            continue
        for word in re.findall(r"[\w.]+/?", entry.group(1)):
            if word.endswith("/"):
                packages.add(f"{top}/{word.rstrip('/')}")
            elif word.endswith(".py"):
                modules.add(f"{top}/{word}")
    return packages, modules


def tree() -> tuple[set[str], set[str]]:
    packages = {str(init.parent.relative_to(ROOT)) for top in CODE for init in (ROOT / top).rglob("__init__.py")}
    # Subpackages one level down are named; deeper ones (store/datasette_plugin) are described with their parent.
    named_level = {package for package in packages if package.count("/") <= 1}
    modules = {str(path.relative_to(ROOT)) for top in CODE for path in (ROOT / top).glob("*.py")
               if path.name != "__init__.py"}
    return named_level, modules


def test_every_package_and_module_of_the_tree_is_in_the_layout() -> None:
    named_packages, named_modules = named_in_layout()
    packages, modules = tree()
    assert packages - named_packages == set(), "packages missing from docs/architecture.md's layout"
    assert modules - named_modules == set(), "top-level modules missing from docs/architecture.md's layout"


def test_everything_the_layout_names_exists() -> None:
    named_packages, named_modules = named_in_layout()
    assert {p for p in named_packages if not (ROOT / p).is_dir()} == set(), "the layout names packages that are gone"
    assert {m for m in named_modules if not (ROOT / m).is_file()} == set(), "the layout names modules that are gone"


def test_the_layout_reader_sees_what_it_should() -> None:
    """The reader itself: a package line and a module line are found, a wrapped description is not."""
    packages, modules = named_in_layout()
    assert {"commands", "bot", "commands/verify", "bot/slack"} <= packages
    assert "commands/vocabulary.py" in modules
    assert not any(" " in name for name in packages | modules)
