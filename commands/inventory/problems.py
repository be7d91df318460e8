"""The inventory's YAML with the line of every key, and the problems found in it, each said at its line
(``FILE:LINE: KEY: what is wrong``), all at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from commands.errors import InventoryError
from commands.inventory.hints import unknown_key
from commands.inventory.hops import HopSpec, jump_spec
from commands.inventory.schema import Invalid, Model

KeyPath = tuple[str | int, ...]


@dataclass
class Problems:
    """Every problem found in one inventory file, each with the line of the key it is about."""

    source: str
    lines: dict[KeyPath, int]
    found: list[tuple[KeyPath, str, str]] = field(default_factory=list)  # (YAML path, key as shown, message)

    def add(self, path: KeyPath, message: str, key: str | None = None) -> None:
        """One problem at path; the same problem again (a file every host shares) is said once."""
        problem = (path, key if key is not None else key_words(path), message)
        if problem not in self.found:
            self.found.append(problem)

    def add_validation(self, prefix: KeyPath, exc: Invalid, model: type[Model],
                       skip: Callable[[KeyPath], bool] = lambda _: False) -> None:
        for loc, kind, message in exc.found:
            if skip(loc):
                continue
            if kind == "extra_forbidden":  # a typo, most often: say which key was meant
                self.add((*prefix, *loc), unknown_key(model, loc))
            else:
                self.add((*prefix, *loc), message.removeprefix("Value error, "))

    def add_raised(self, exc: InventoryError) -> None:
        """A problem raised as ``SOURCE: KEY: message`` (the hop parsers), recorded at its key."""
        key, _, message = exc.message.removeprefix(f"{self.source}: ").partition(": ")
        self.add(tuple(key.split(".")), message, key=key)

    def hops(self, path: KeyPath, written: object) -> list[HopSpec]:
        """``jump`` as hops; a bad one is a problem at its key, and no hops."""
        try:
            return jump_spec(self.source, key_words(path), written)
        except InventoryError as exc:
            self.add_raised(exc)
            return []

    def line_of(self, path: KeyPath) -> int:
        """The line of the deepest key of ``path`` written in the file (a missing key: its parent's)."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return 1

    def raise_if_any(self) -> None:
        if not self.found:
            return
        problems: list[dict[str, object]] = [
            {"file": self.source, "line": self.line_of(path), "key": key, "message": message}
            for path, key, message in self.found]
        problems.sort(key=lambda problem: int(str(problem["line"])))
        lines = [f"{p['file']}:{p['line']}: {p['key']}: {p['message']}" for p in problems]
        hint = f"{len(problems)} problems in {self.source}" if len(problems) > 1 else ""
        raise InventoryError("\n".join(lines), hint=hint, problems=problems)


def key_words(path: KeyPath) -> str:
    return ".".join(str(part) for part in path)


def key_lines(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int],
               duplicates: list[tuple[KeyPath, int, int]]) -> None:
    """The 1-based line of every key (and sequence item) by its path; duplicate keys noted."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark.line)
            child = (*path, key)
            if child in lines:  # YAML keeps the last one written: its lines are the ones that count
                duplicates.append((child, lines[child], key_node.start_mark.line + 1))
                for stale in [known for known in lines if known[:len(child)] == child]:
                    del lines[stale]
            lines[child] = key_node.start_mark.line + 1
            key_lines(value_node, child, lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.setdefault((*path, index), item.start_mark.line + 1)
            key_lines(item, (*path, index), lines, duplicates)


# libyaml when PyYAML was built with it: one parse gives both the nodes (for line numbers) and
# the data, ~10x less CPU than parsing twice in pure Python (which a one-host verify felt).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose_and_load(text: str) -> tuple[yaml.Node | None, Any]:
    try:
        return _compose_and_load_with(_Loader, text)
    except yaml.YAMLError:
        # pure-Python PyYAML marks a syntax error where a person looks for it (libyaml marks the
        # end of the stream for an unclosed bracket): parse again to raise its error instead
        return _compose_and_load_with(yaml.SafeLoader, text)


def _compose_and_load_with(loader_class: Any, text: str) -> tuple[yaml.Node | None, Any]:
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        return root, (loader.construct_document(root) if root is not None else None)
    finally:
        loader.dispose()
