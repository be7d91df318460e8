"""The inventory's models as frozen slotted dataclasses, validated from parsed YAML without pydantic (its import and
validator build cost a cold CLI run ~0.08 CPU-s): each field by its type hint, as lax as pydantic 2 was and with its
very messages (tests/data/inventory_corpus.json.gz holds them), every problem at its key path, then the model's rules.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Self, Union, get_args, get_origin, get_type_hints

Loc = tuple[str | int, ...]
Error = tuple[Loc, str, str]  # (where, pydantic's error type, message)
_FAIL: Any = object()  # a value that did not validate (its errors are already recorded)
_INT = re.compile(r"\s*[+-]?[0-9](?:_?[0-9])*(?:\.0*)?\s*", re.ASCII)
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class Invalid(ValueError):
    """Everything wrong with one value, each at its location (``errors()`` as pydantic gave them)."""

    def __init__(self, found: list[Error]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, loc)) or '(top)'}: {message}" for loc, _, message in found))
        self.found = found

    def errors(self) -> list[dict[str, Any]]:
        return [{"loc": loc, "type": kind, "msg": message} for loc, kind, message in self.found]


def rules(*, gt: float | None = None, ge: float | None = None, le: float | None = None, strict: bool = False,
          alias: str | None = None, min_length: int | None = None, validate_default: bool = False) -> dict[str, Any]:
    """A field's constraints, for ``dataclasses.field(metadata=rules(...))``."""
    found = {"gt": gt, "ge": ge, "le": le, "strict": strict or None, "alias": alias, "min_length": min_length,
             "validate_default": validate_default or None}
    return {key: value for key, value in found.items() if value is not None}


@dataclasses.dataclass(frozen=True, slots=True)
class Spec:
    """One field of a model: its name, the key it is written as, its type hint, default and rules."""

    name: str
    key: str
    hint: Any
    field: dataclasses.Field[Any]
    rules: Mapping[str, Any]

    @property
    def required(self) -> bool:
        return self.field.default is dataclasses.MISSING and self.field.default_factory is dataclasses.MISSING

    def default(self) -> Any:
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return self.field.default


_SPECS: dict[type, tuple[Spec, ...]] = {}


def specs(model: type[Model]) -> tuple[Spec, ...]:
    """The model's fields, from its type hints (resolved at first use, once)."""
    found = _SPECS.get(model)
    if found is None:
        hints = get_type_hints(model)
        found = tuple(Spec(field.name, field.metadata.get("alias", field.name), hints[field.name], field,
                           field.metadata) for field in dataclasses.fields(model))  # type: ignore[arg-type]
        _SPECS[model] = found
    return found


class Model:
    """Every inventory model: unknown keys are refused (a typo is reported, never ignored), values frozen. Built
    from YAML by ``model_validate``; built in code, its values are validated the same way (what differs from
    the defaults counts as written)."""

    __slots__ = ()
    # field name -> its own checks, run in order after its type's (value, the fields before it) -> value
    checks: ClassVar[Mapping[str, tuple[Callable[[Any, dict[str, Any]], Any], ...]]] = {}

    @classmethod
    def prepare(cls, raw: Any) -> Any:
        """The value as written, before the fields are read (a short form made a mapping)."""
        return raw

    @classmethod
    def complete(cls, values: dict[str, Any], written: Mapping[str, Any]) -> None:
        """Rules over several fields once each is valid (raise ValueError); may complete ``values``."""

    @classmethod
    def model_validate(cls, raw: Any) -> Self:
        errors: list[Error] = []
        value = validate_model(cls, raw, (), errors)
        if errors:
            raise Invalid(errors)
        return value  # type: ignore[no-any-return]

    def __post_init__(self) -> None:
        model = type(self)
        written = {spec.key: getattr(self, spec.name) for spec in specs(model)
                   if spec.required or getattr(self, spec.name) != spec.default()}
        errors: list[Error] = []
        values = _fields(model, written, (), errors)
        if errors:
            raise Invalid(errors)
        for spec in specs(model):  # a value equal to its default stays as given; one the rules filled in is set
            if spec.name in values and (spec.key in written or values[spec.name] != spec.default()):
                object.__setattr__(self, spec.name, values[spec.name])

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with ``update`` applied, not validated again (as pydantic's)."""
        copy: Self = _build(type(self), {**{spec.name: getattr(self, spec.name) for spec in specs(type(self))},
                                         **(update or {})})
        return copy

    def model_dump(self, *, by_alias: bool = False, exclude_none: bool = False, include: set[str] | None = None,
                   exclude: set[str] | None = None) -> dict[str, Any]:
        """The fields as plain data (tuples as lists), in order."""
        shown: dict[str, Any] = {}
        for spec in specs(type(self)):
            if (include is not None and spec.name not in include) or (exclude and spec.name in exclude):
                continue
            value = _plain(getattr(self, spec.name))
            if not (exclude_none and value is None):
                shown[spec.key if by_alias else spec.name] = value
        return shown

    def model_dump_json(self, *, include: set[str] | None = None, exclude: set[str] | None = None) -> str:
        """One stable line of the fields (the SSH pool's key for a host's login)."""
        return json.dumps(self.model_dump(include=include, exclude=exclude), separators=(",", ":"))


def _plain(value: Any) -> Any:
    if isinstance(value, Model):
        return value.model_dump()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _build(model: type[Model], values: dict[str, Any]) -> Any:
    built = object.__new__(model)
    for name, value in values.items():
        object.__setattr__(built, name, value)
    return built


def validate_model(model: type[Model], raw: Any, loc: Loc, errors: list[Error]) -> Any:
    raw = model.prepare(raw)
    if isinstance(raw, model):
        return raw
    if not isinstance(raw, dict):
        errors.append((loc, "model_type", f"Input should be a valid dictionary or instance of {model.__name__}"))
        return _FAIL
    before = len(errors)
    values = _fields(model, raw, loc, errors)
    if len(errors) > before:
        return _FAIL
    return _build(model, values)


def _fields(model: type[Model], raw: Mapping[str, Any], loc: Loc, errors: list[Error]) -> dict[str, Any]:
    """Each field from ``raw`` (or its default), then the model's rules over them; problems go to ``errors``."""
    before = len(errors)
    values: dict[str, Any] = {}
    known: set[Any] = set()
    for spec in specs(model):
        known.update((spec.key, spec.name))
        key = spec.key if spec.key in raw else spec.name
        if key not in raw:
            if spec.required:
                errors.append(((*loc, spec.key), "missing", "Field required"))
                continue
            values[spec.name] = spec.default()
            if not spec.rules.get("validate_default"):
                continue
            key, value = spec.key, values[spec.name]
        else:
            value = check(spec.hint, raw[key], (*loc, key), errors, spec.rules)
            if value is _FAIL:
                continue
        try:
            for own in model.checks.get(spec.name, ()):
                value = own(value, values)
        except ValueError as exc:
            values.pop(spec.name, None)
            errors.append(((*loc, key), "value_error", f"Value error, {exc}"))
            continue
        values[spec.name] = value
    errors.extend(((*loc, key), "extra_forbidden", "Extra inputs are not permitted")
                  for key in raw if key not in known)
    if len(errors) == before:
        try:
            model.complete(values, raw)
        except ValueError as exc:
            errors.append((loc, "value_error", f"Value error, {exc}"))
    return values


def check(hint: Any, value: Any, loc: Loc, errors: list[Error], own: Mapping[str, Any] | None = None) -> Any:
    """``value`` as ``hint`` (lax, as pydantic 2), or _FAIL with its errors recorded; ``own``: the field's rules."""
    if hint is Any:
        return value
    origin = get_origin(hint)
    if isinstance(hint, type):
        if issubclass(hint, Model):
            return validate_model(hint, value, loc, errors)
        scalar = _SCALARS[hint](value, bool(own and own.get("strict")))
        if isinstance(scalar, tuple):  # (type, message): not one
            errors.append((loc, *scalar))
            return _FAIL
        return _bounded(scalar, loc, errors, own) if own else scalar
    if origin is Literal:
        if any(value == allowed and type(value) is type(allowed) for allowed in get_args(hint)):
            return value
        shown = [repr(allowed) for allowed in get_args(hint)]
        words = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        errors.append((loc, "literal_error", f"Input should be {words}"))
        return _FAIL
    if origin in (Union, types.UnionType):
        return _union(get_args(hint), value, loc, errors, own)
    if origin is list or origin is tuple:
        return _sequence(hint, value, loc, errors, own)
    if origin is dict:
        if not isinstance(value, dict):
            errors.append((loc, "dict_type", "Input should be a valid dictionary"))
            return _FAIL
        key_hint, item_hint = get_args(hint)
        out: dict[Any, Any] = {}
        before = len(errors)
        for key, item in value.items():
            good_key = check(key_hint, key, (*loc, key, "[key]"), errors)
            good = check(item_hint, item, (*loc, key), errors)
            if good_key is not _FAIL and good is not _FAIL:
                out[good_key] = good
        return out if len(errors) == before else _FAIL
    raise TypeError(f"no validator for {hint!r}")


def _union(members: tuple[Any, ...], value: Any, loc: Loc, errors: list[Error], own: Mapping[str, Any] | None) -> Any:
    """``X | None`` is X that may be null; a union of several is the first that takes the value, else each one's
    errors under its name (pydantic's smart union, for the shapes the inventory has)."""
    rest = [member for member in members if member is not type(None)]
    if value is None and len(rest) < len(members):
        return None
    if len(rest) == 1:
        return check(rest[0], value, loc, errors, own)
    tried: list[Error] = []
    for member in rest:
        attempt: list[Error] = []
        result = check(member, value, (*loc, _tag(member)), attempt, own)
        if not attempt:
            return result
        tried += attempt
    errors.extend(tried)
    return _FAIL


def _tag(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _sequence(hint: Any, value: Any, loc: Loc, errors: list[Error], own: Mapping[str, Any] | None) -> Any:
    is_tuple = get_origin(hint) is tuple
    if not isinstance(value, (list, tuple, set, frozenset)):  # YAML's !!set is a set
        kind = "tuple" if is_tuple else "list"
        errors.append((loc, f"{kind}_type", f"Input should be a valid {kind}"))
        return _FAIL
    item_hint = get_args(hint)[0]
    before = len(errors)
    items = [check(item_hint, item, (*loc, index), errors) for index, item in enumerate(value)]
    if len(errors) > before:
        return _FAIL
    least = own.get("min_length") if own else None
    if least is not None and len(items) < least:
        errors.append((loc, "too_short", f"List should have at least {least} item after validation, not {len(items)}"))
        return _FAIL
    return tuple(items) if is_tuple else items


# In pydantic-core's order (which one a NaN fails first).
_BOUNDS: tuple[tuple[str, str, str, Callable[[Any, Any], bool]], ...] = (
    ("le", "less_than_equal", "less than or equal to", lambda value, bound: bool(value <= bound)),
    ("ge", "greater_than_equal", "greater than or equal to", lambda value, bound: bool(value >= bound)),
    ("gt", "greater_than", "greater than", lambda value, bound: bool(value > bound)))


def _bounded(value: Any, loc: Loc, errors: list[Error], own: Mapping[str, Any]) -> Any:
    for rule, kind, words, holds in _BOUNDS:
        bound = own.get(rule)
        if bound is not None and not holds(value, bound):
            errors.append((loc, kind, f"Input should be {words} {bound}"))
            return _FAIL
    return value


def _str(value: Any, strict: bool) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)) and not strict:
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            return "string_unicode", "Input should be a valid string, unable to parse raw data as a unicode string"
    return "string_type", "Input should be a valid string"


def _int(value: Any, strict: bool) -> Any:
    if isinstance(value, int) and not (strict and isinstance(value, bool)):
        return int(value)
    if strict:
        return "int_type", "Input should be a valid integer"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "finite_number", "Input should be a finite number"
        if not value.is_integer():
            return "int_from_float", "Input should be a valid integer, got a number with a fractional part"
        if not -2.0 ** 63 < value < 2.0 ** 63:
            return "int_parsing_size", "Unable to parse input string as an integer, exceeded maximum size"
        return int(value)
    if isinstance(value, (str, bytes)):
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if _INT.fullmatch(text):
            return int(text.strip().partition(".")[0])
        return "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
    return "int_type", "Input should be a valid integer"


def _float(value: Any, strict: bool) -> Any:
    if isinstance(value, (int, float)) and not (strict and isinstance(value, bool)):
        return float(value)
    if isinstance(value, (str, bytes)) and not strict:
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if text.isascii():
            try:
                return float(text)
            except ValueError:
                pass
        return "float_parsing", "Input should be a valid number, unable to parse string as a number"
    return "float_type", "Input should be a valid number"


def _bool(value: Any, strict: bool) -> Any:
    if isinstance(value, bool):
        return value
    if strict:
        return "bool_type", "Input should be a valid boolean"
    # pydantic-core reads a whole number (an i64, or a float without a fraction) as 0/1; anything else is no bool
    if (isinstance(value, int) and -2 ** 63 <= value < 2 ** 63) or (
            isinstance(value, float) and value.is_integer() and -2.0 ** 63 < value < 2.0 ** 63):
        if value in (0, 1):
            return bool(value)
        return "bool_parsing", "Input should be a valid boolean, unable to interpret input"
    if isinstance(value, (str, bytes)):
        text = (value.decode(errors="replace") if isinstance(value, bytes) else value).lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        return "bool_parsing", "Input should be a valid boolean, unable to interpret input"
    return "bool_type", "Input should be a valid boolean"


_SCALARS: dict[type, Callable[[Any, bool], Any]] = {str: _str, int: _int, float: _float, bool: _bool}
