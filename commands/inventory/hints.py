"""Inventory mistakes said where a person looks for them: a YAML syntax error at the line of the
mistake (PyYAML often marks the line after it), and an unknown key with the key it was meant to be.
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

import yaml

from commands.inventory.schema import Model, specs

# Errors PyYAML marks where it gave up (the end of the file, the next line) while the mistake is
# where the thing it was reading began (its context mark): an unclosed quote or bracket, a list
# item without its "- ".
_STARTED_THERE = ("while scanning a quoted scalar", "while scanning a simple key",
                  "while parsing a flow sequence", "while parsing a flow mapping")


def yaml_error_at(text: str, exc: yaml.MarkedYAMLError) -> tuple[int, int, str]:
    """(line, column, what) of a YAML syntax error, 1-based, at the line where the mistake is."""
    what = " ".join(part for part in (exc.context, exc.problem) if part) or "syntax error"
    mark = exc.problem_mark or exc.context_mark
    if exc.context in _STARTED_THERE and exc.context_mark is not None:
        mark = exc.context_mark
        what += f" (the {_opened(exc.context)} on line {mark.line + 1} is not closed where it should be)" \
            if "flow" in exc.context or "quoted" in exc.context else ""
    elif exc.problem == "mapping values are not allowed here" and mark is not None:
        key = _key_run_on(text, mark.line)
        if key is not None:
            line, column, words = key
            return line, column, (f"{what}: {words!r} runs on to line {mark.line + 1}: a key missing its ': ' "
                                  "(a colon and a space)?")
    if mark is None:
        return 1, 1, what
    return mark.line + 1, mark.column + 1, what


def _opened(context: str) -> str:
    return {"while scanning a quoted scalar": "quote", "while parsing a flow sequence": "'['",
            "while parsing a flow mapping": "'{'"}.get(context, "value")


def _key_run_on(text: str, error_line: int) -> tuple[int, int, str] | None:
    """A plain scalar in a key's place (first on its line) that began on an earlier line than the ':'
    PyYAML stopped at: ``address 10.0.0.1`` then ``port: 22`` read as one key. A value that runs on
    (``address: a`` then an over-indented ``port: 22``) is the later line's mistake: None."""
    before: Any = None
    last: Any = None
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            before, last = last, token
    except yaml.YAMLError:
        pass
    if not isinstance(last, yaml.ScalarToken) or last.start_mark.line >= error_line:
        return None
    if isinstance(before, yaml.ValueToken) and before.start_mark.line == last.start_mark.line:
        return None
    return last.start_mark.line + 1, last.start_mark.column + 1, last.value


def unknown_key(model: type[Model], loc: tuple[str | int, ...]) -> str:
    """What to say of ``loc[-1]``, a key the model at ``loc[:-1]`` does not have."""
    import difflib  # only for a file with a typo: not on every load

    known = _keys_at(model, loc[:-1])
    if not known:
        return "not an inventory key"
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"not an inventory key; did you mean `{close[0]}`?"
    return "not an inventory key here; known: " + ", ".join(f"`{key}`" for key in known)


def _keys_at(model: type[Model], parents: tuple[str | int, ...]) -> list[str]:
    annotation: Any = model
    for part in parents:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    found = _model_in(annotation)
    if found is None:
        return []
    return [spec.key for spec in specs(found) if spec.name != "origins"]


def _step(annotation: Any, part: str | int) -> Any:
    """The annotation one key (or index) down: a model's field, a dict's value or a list's item."""
    found = _model_in(annotation)
    if found is not None:
        for spec in specs(found):
            if part in (spec.name, spec.key):
                return spec.hint
        return None
    for arg in _members(annotation):
        origin = get_origin(arg)
        if origin is dict and isinstance(part, str):
            return get_args(arg)[1]
        if origin in (list, tuple) and isinstance(part, int):
            return get_args(arg)[0]
    return None


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _model_in(annotation: Any) -> type[Model] | None:
    for arg in _members(annotation):
        if isinstance(arg, type) and issubclass(arg, Model):
            return arg
    return None
