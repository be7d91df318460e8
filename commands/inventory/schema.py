"""The inventory's models as frozen slotted dataclasses, validated from parsed YAML without pydantic (its import and
validator build cost a cold CLI run ~0.08 CPU-s): each field by its type hint, as lax as pydantic 2 was and with its
very messages (tests/data/inventory_corpus.json.gz holds them), every problem at its key path, then the model's rules.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar, dataclass_transform

from commands.frozen import Frozen
from commands.inventory.lax import FAIL, Checker, Error, Loc, check, checker

__all__ = ["Invalid", "Loc", "Model", "check", "model", "rules", "specs"]

T = TypeVar("T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,))
def model(cls: type[T]) -> type[T]:
    """An inventory model: a frozen, slotted, keyword-only dataclass. ``Model`` holds its ``__init__`` and the refusal
    to assign (``Frozen`` its ``__eq__``, ``__hash__`` and ``__repr__``), once for every model:
    ``dataclass(frozen=True)`` compiled six functions per class (~0.7 ms each model, at every cold start); the
    behaviour is the same (tests/test_inventory_schema.py compares them with a frozen dataclass's)."""
    return dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False)(cls)


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


class Spec:
    """One field of a model: its name, the key it is written as, its type hint, default and rules. The hint and its
    reader are made when first asked for: a field never written (an inventory's ``watch`` or ``policies``) loads
    nothing for its type."""

    __slots__ = ("_hint", "_model", "_read", "checks", "field", "key", "name", "required", "rules", "validate_default")

    def __init__(self, model: type[Model], field: dataclasses.Field[Any]) -> None:
        self.name, self.field, self.rules = field.name, field, field.metadata
        self.key = field.metadata.get("alias", field.name)
        self.checks: tuple[Callable[[Any, dict[str, Any]], Any], ...] = tuple(model.checks.get(field.name, ()))
        self.required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        self.validate_default = bool(field.metadata.get("validate_default"))
        self._model = model
        self._hint: Any = _UNREAD
        self._read: Checker | None = None

    @property
    def hint(self) -> Any:
        if self._hint is _UNREAD:
            self._hint = _hint(self.field.type, self._model)
        return self._hint

    @property
    def read(self) -> Checker:
        if self._read is None:
            self._read = checker(self.hint, self.rules)
        return self._read

    def default(self) -> Any:
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return self.field.default


_UNREAD = object()
_SPECS: dict[type, tuple[tuple[Spec, ...], frozenset[str]]] = {}


def specs(model: type[Model]) -> tuple[Spec, ...]:
    """The model's fields (their type hints resolved at first use, once)."""
    return _model_specs(model)[0]


def _model_specs(model: type[Model]) -> tuple[tuple[Spec, ...], frozenset[str]]:
    """The fields, and every key they may be written as."""
    found = _SPECS.get(model)
    if found is None:
        fields = tuple(Spec(model, field) for field in dataclasses.fields(model))  # type: ignore[arg-type]
        found = _SPECS[model] = fields, frozenset(key for spec in fields for key in (spec.key, spec.name))
    return found


_HINTS: dict[tuple[str, str], Any] = {}
_BUILTIN_HINTS = {"str": str, "int": int, "float": float, "bool": bool, "Any": Any}


def _hint(written: Any, model: type[Model]) -> Any:
    """A field's annotation (a string: the models use postponed annotations) evaluated in its module, each distinct
    text once: typing.get_type_hints compiled every one of them again (~2 ms of a cold run). A name the module
    imports for type checking only is taken from the model's ``imported``."""
    if not isinstance(written, str):
        return written
    found = _BUILTIN_HINTS.get(written)
    if found is None:
        module = model.__module__
        found = _HINTS.get((module, written))
        if found is None:
            names = {name: getattr(importlib.import_module(home), name) for name, home in model.imported.items()
                     if name in written}
            found = _HINTS[(module, written)] = eval(written, vars(sys.modules[module]), names)  # our own source
    return found


class Model(Frozen):
    """Every inventory model: unknown keys are refused (a typo is reported, never ignored), values frozen. Built
    from YAML by ``model_validate``; built in code, its values are validated the same way (what differs from
    the defaults counts as written)."""

    __slots__ = ()
    # field name -> its own checks, run in order after its type's (value, the fields before it) -> value
    checks: ClassVar[Mapping[str, tuple[Callable[[Any, dict[str, Any]], Any], ...]]] = {}
    # name -> its module, for a name the model's annotations use that its module imports for type checking only
    imported: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def prepare(cls, raw: Any) -> Any:
        """The value as written, before the fields are read (a short form made a mapping)."""
        return raw

    @classmethod
    def complete(cls, values: dict[str, Any], written: Mapping[str, Any]) -> None:
        """Rules over several fields once each is valid (raise ValueError); may complete ``values``."""

    @classmethod
    def validate_into(cls, raw: Any, loc: Loc, errors: list[Error]) -> Any:
        """The model read from ``raw`` at ``loc``, or FAIL with its problems added to ``errors``."""
        return validate_model(cls, raw, loc, errors)

    @classmethod
    def model_validate(cls, raw: Any) -> Self:
        errors: list[Error] = []
        value = validate_model(cls, raw, (), errors)
        if errors:
            raise Invalid(errors)
        return value  # type: ignore[no-any-return]

    def __init__(self, **given: Any) -> None:
        """What ``dataclass(frozen=True, kw_only=True)`` generates, for every model: each field given or its default,
        then ``__post_init__``."""
        fields = _init_fields(type(self))
        unknown = [name for name in given if name not in fields]
        if unknown:
            raise TypeError(f"{type(self).__qualname__}.__init__() got an unexpected keyword argument {unknown[0]!r}")
        missing = [repr(name) for name, (default, factory) in fields.items()
                   if name not in given and default is factory is dataclasses.MISSING]
        if missing:
            raise TypeError(f"{type(self).__qualname__}.__init__() missing {len(missing)} required keyword-only "
                            f"argument{'s' if len(missing) > 1 else ''}: {_listed(missing)}")
        for name, (default, factory) in fields.items():
            value = given[name] if name in given else default if factory is dataclasses.MISSING else factory()
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> list[Any]:  # copy and pickle, as a frozen slotted dataclass's
        return [getattr(self, name) for name in _all_names(type(self))]

    def __setstate__(self, state: list[Any]) -> None:
        for name, value in zip(_all_names(type(self)), state, strict=True):
            object.__setattr__(self, name, value)

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
        """One stable line of the fields (the SSH pool's key for a host's login, asked for at every connection: the
        line of a frozen model is made once)."""
        key = (id(self), frozenset(include) if include is not None else None, frozenset(exclude or ()))
        kept = _DUMPS.get(key)
        if kept is not None and kept[0] is self:
            return kept[1]
        line = json.dumps(self.model_dump(include=include, exclude=exclude), separators=(",", ":"))
        if len(_DUMPS) >= 4096:  # bounded: a long-running serve reloads its inventory
            _DUMPS.clear()
        _DUMPS[key] = (self, line)
        return line


_DUMPS: dict[tuple[int, frozenset[str] | None, frozenset[str]], tuple[Model, str]] = {}
_INIT: dict[type, dict[str, tuple[Any, Any]]] = {}
_ALL_NAMES: dict[type, tuple[str, ...]] = {}


def _init_fields(model: type[Model]) -> dict[str, tuple[Any, Any]]:
    """Each field ``__init__`` takes: its default and its default factory (either may be MISSING)."""
    found = _INIT.get(model)
    if found is None:
        found = _INIT[model] = {field.name: (field.default, field.default_factory)
                                for field in dataclasses.fields(model) if field.init}  # type: ignore[arg-type]
    return found


def _listed(names: list[str]) -> str:
    """As CPython lists missing arguments: 'a', 'a' and 'b', 'a', 'b', and 'c'."""
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + ", and " + names[-1]


def _all_names(model: type[Model]) -> tuple[str, ...]:
    found = _ALL_NAMES.get(model)
    if found is None:
        found = _ALL_NAMES[model] = tuple(field.name for field in dataclasses.fields(model))  # type: ignore[arg-type]
    return found


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
        return FAIL
    before = len(errors)
    values = _fields(model, raw, loc, errors)
    if len(errors) > before:
        return FAIL
    return _build(model, values)


def _fields(model: type[Model], raw: Mapping[str, Any], loc: Loc, errors: list[Error]) -> dict[str, Any]:
    """Each field from ``raw`` (or its default), then the model's rules over them; problems go to ``errors``."""
    before = len(errors)
    values: dict[str, Any] = {}
    fields, known = _model_specs(model)
    for spec in fields:
        key = spec.key if spec.key in raw else spec.name
        if key not in raw:
            if spec.required:
                errors.append(((*loc, spec.key), "missing", "Field required"))
                continue
            values[spec.name] = spec.default()
            if not spec.validate_default:
                continue
            key, value = spec.key, values[spec.name]
        else:
            value = spec.read(raw[key], (*loc, key), errors)
            if value is FAIL:
                continue
        if spec.checks:
            try:
                for own in spec.checks:
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


