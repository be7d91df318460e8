"""Equality, hash and repr of a frozen dataclass, written once: ``@dataclass(frozen=True, eq=False, repr=False)``
over ``Frozen`` behaves as ``@dataclass(frozen=True)``, with three functions fewer compiled per class (~0.4 ms)."""

from __future__ import annotations

import dataclasses
import reprlib
from typing import Any

_NAMES: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def field_names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields compared (and hashed), and those repr shows, as a frozen dataclass's generated methods take them."""
    found = _NAMES.get(cls)
    if found is None:
        fields = dataclasses.fields(cls)
        found = _NAMES[cls] = (tuple(field.name for field in fields if field.compare),
                               tuple(field.name for field in fields if field.repr))
    return found


class Frozen:
    """The base of a frozen dataclass declared ``eq=False, repr=False`` (its methods are these, for every class)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return _compared(self) == _compared(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(_compared(self))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in field_names(type(self))[1])
        return f"{type(self).__qualname__}({shown})"


def _compared(value: Any) -> tuple[Any, ...]:
    return tuple(getattr(value, name) for name in field_names(type(value))[0])
