"""commands/frozen.py: a frozen dataclass over ``Frozen`` (its eq and repr) behaves as ``dataclass(frozen=True)``."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from commands.frozen import Frozen
from commands.host_cert import Presented
from commands.inventory.hops import HopSpec


@dataclass(frozen=True, eq=False, repr=False)
class Ours(Frozen):
    name: str
    port: int | None = None
    seen: list[str] = field(default_factory=list, compare=False, repr=False)


@dataclass(frozen=True)
class Theirs:
    name: str
    port: int | None = None
    seen: list[str] = field(default_factory=list, compare=False, repr=False)


def test_equality_hash_and_repr_are_a_frozen_dataclass_s() -> None:
    ours, theirs = Ours("b", 22, ["x"]), Theirs("b", 22, ["x"])
    assert repr(ours) == repr(theirs).replace("Theirs", "Ours") == "Ours(name='b', port=22)"
    assert ours == Ours("b", 22) and hash(ours) == hash(Ours("b", 22)) == hash(("b", 22)) == hash(theirs)
    assert ours != Ours("b", 23) and ours != theirs and ours.__eq__(theirs) is NotImplemented
    assert len({ours, Ours("b", 22, ["y"])}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):  # still the dataclass's own (frozen=True)
        ours.port = 1  # type: ignore[misc]
    for copied in (copy.copy(ours), copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert copied == ours and copied.seen == ["x"]
    assert dataclasses.replace(ours, port=2).port == 2


def test_the_classes_that_use_it() -> None:
    hop = HopSpec("u@b:2", "u", "b", 2)
    assert repr(hop) == "HopSpec(written='u@b:2', user='u', host='b', port=2, config=None)"
    assert hop == HopSpec("u@b:2", "u", "b", 2) and {hop: 1}[HopSpec("u@b:2", "u", "b", 2)] == 1
    assert dataclasses.fields(Presented)[0].name == "key" and issubclass(Presented, Frozen)
