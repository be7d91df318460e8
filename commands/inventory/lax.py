"""How a value written in YAML is read as a field's type, as pydantic 2 read it in lax mode (``"22"`` is the int 22,
``yes`` a bool) with its very error kinds and messages; each type hint is made into a checker once."""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

Loc = tuple[str | int, ...]
Error = tuple[Loc, str, str]  # (where, pydantic's error type, message)
Checker = Callable[[Any, Loc, list[Error]], Any]  # (value, where, errors) -> the value read, or FAIL
FAIL: Any = object()  # a value that did not validate (its errors are already recorded)
_INT = re.compile(r"\s*[+-]?[0-9](?:_?[0-9])*(?:\.0*)?\s*", re.ASCII)
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_I64 = 2.0 ** 63
_COMPILED: dict[Any, Checker] = {}


def checker(hint: Any, own: Mapping[str, Any] | None = None) -> Checker:
    """The checker of ``hint`` with a field's rules (``own``: gt, ge, le, strict, min_length), made once."""
    key = (hint, tuple(sorted((own or {}).items())))
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = _compile(hint, own or {})
    return found


def check(hint: Any, value: Any, loc: Loc, errors: list[Error], own: Mapping[str, Any] | None = None) -> Any:
    """``value`` as ``hint``, or FAIL with its errors recorded."""
    return checker(hint, own)(value, loc, errors)


def _compile(hint: Any, own: Mapping[str, Any]) -> Checker:
    if hint is Any:
        return lambda value, loc, errors: value
    origin = get_origin(hint)
    if isinstance(hint, type):
        validate_into = getattr(hint, "validate_into", None)  # a model (commands/inventory/schema.py)
        if validate_into is not None:
            return validate_into  # type: ignore[no-any-return]
        return _scalar(hint, own)
    if origin is Literal:
        return _literal(get_args(hint))
    if origin in (Union, types.UnionType):
        return _union(get_args(hint), own)
    if origin is list or origin is tuple:
        return _sequence(origin is tuple, checker(get_args(hint)[0]), own.get("min_length"))
    if origin is dict:
        return _mapping(*(checker(arg) for arg in get_args(hint)))
    raise TypeError(f"no checker for {hint!r}")


def _scalar(hint: type, own: Mapping[str, Any]) -> Checker:
    convert, strict = _SCALARS[hint], bool(own.get("strict"))
    bounds = [(kind, f"Input should be {words} {own[rule]}", holds, own[rule])
              for rule, kind, words, holds in _BOUNDS if own.get(rule) is not None]

    def read(value: Any, loc: Loc, errors: list[Error]) -> Any:
        if type(value) is hint and not bounds:  # the common case: written as the type it is
            return value
        found = convert(value, strict)
        if type(found) is tuple:  # (kind, message): not one
            errors.append((loc, *found))
            return FAIL
        for kind, message, holds, bound in bounds:
            if not holds(found, bound):
                errors.append((loc, kind, message))
                return FAIL
        return found
    return read


def _literal(allowed: tuple[Any, ...]) -> Checker:
    shown = [repr(choice) for choice in allowed]
    message = "Input should be " + (shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}")

    def read(value: Any, loc: Loc, errors: list[Error]) -> Any:
        if any(value == choice and type(value) is type(choice) for choice in allowed):
            return value
        errors.append((loc, "literal_error", message))
        return FAIL
    return read


def _union(members: tuple[Any, ...], own: Mapping[str, Any]) -> Checker:
    """``X | None`` is X that may be null; a union of several is the first that takes the value, else each one's
    errors under its name (pydantic's smart union, for the shapes the inventory has)."""
    rest = [member for member in members if member is not type(None)]
    nullable = len(rest) < len(members)
    if len(rest) == 1:
        only = checker(rest[0], own)
        return (lambda value, loc, errors: None if value is None else only(value, loc, errors)) if nullable else only
    tagged = [(checker(member, own), member.__name__ if isinstance(member, type) else str(member)) for member in rest]

    def read(value: Any, loc: Loc, errors: list[Error]) -> Any:
        if value is None and nullable:
            return None
        tried: list[Error] = []
        for one, tag in tagged:
            attempt: list[Error] = []
            result = one(value, (*loc, tag), attempt)
            if not attempt:
                return result
            tried += attempt
        errors.extend(tried)
        return FAIL
    return read


def _sequence(is_tuple: bool, item: Checker, least: int | None) -> Checker:
    kind = "tuple" if is_tuple else "list"

    def read(value: Any, loc: Loc, errors: list[Error]) -> Any:
        if not isinstance(value, (list, tuple, set, frozenset)):  # YAML's !!set is a set
            errors.append((loc, f"{kind}_type", f"Input should be a valid {kind}"))
            return FAIL
        before = len(errors)
        items = [item(each, (*loc, index), errors) for index, each in enumerate(value)]
        if len(errors) > before:
            return FAIL
        if least is not None and len(items) < least:
            errors.append((loc, "too_short", f"List should have at least {least} item after validation, "
                                             f"not {len(items)}"))
            return FAIL
        return tuple(items) if is_tuple else items
    return read


def _mapping(key_checker: Checker, item: Checker) -> Checker:
    def read(value: Any, loc: Loc, errors: list[Error]) -> Any:
        if not isinstance(value, dict):
            errors.append((loc, "dict_type", "Input should be a valid dictionary"))
            return FAIL
        out: dict[Any, Any] = {}
        before = len(errors)
        for key, each in value.items():
            good_key = key_checker(key, (*loc, key, "[key]"), errors)
            good = item(each, (*loc, key), errors)
            if good_key is not FAIL and good is not FAIL:
                out[good_key] = good
        return out if len(errors) == before else FAIL
    return read


# In pydantic-core's order (which one a NaN fails first).
_BOUNDS: tuple[tuple[str, str, str, Callable[[Any, Any], bool]], ...] = (
    ("le", "less_than_equal", "less than or equal to", lambda value, bound: bool(value <= bound)),
    ("ge", "greater_than_equal", "greater than or equal to", lambda value, bound: bool(value >= bound)),
    ("gt", "greater_than", "greater than", lambda value, bound: bool(value > bound)))


def _str(value: Any, strict: bool) -> Any:
    if isinstance(value, str):  # a str subclass (a StrEnum the code passes) is kept as the plain str, as pydantic did
        return str.__str__(value)
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
        if not -_I64 < value < _I64:
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
            isinstance(value, float) and value.is_integer() and -_I64 < value < _I64):
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
