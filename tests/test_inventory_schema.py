"""commands/inventory/schema.py against pydantic 2 (a dev dependency, the validator the inventory used): the same
inputs through the same types give the same value or the same errors (location, kind and message), so an operator
reads what they read before; and a model built in code is validated as one read from a file."""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from commands.inventory import Backup, Host, Service
from commands.inventory.containers import Engine
from commands.inventory.policies import implicit_policy
from commands.inventory.schema import Invalid, Loc, Model, check, rules
from commands.inventory.settings import Approvals
from commands.vocabulary import Operation

VALUES: list[Any] = [
    None, "", "x", " 22 ", "22", "22.0", "22.5", "+5", "-0", "1_000", "1__0", "_1", "0x10", "1e3", "inf", "-inf", "nan",
    "\uff11\uff12", "yes", "On", "OFF", "t", "F", "n", "0", "1", "2", 0, 1, 2, -1, 7, 65535, 65536, 10**30, 2**63,
    -(2**63) - 1,
    0.0, 1.0, 2.0, 1.5, -0.5, 22.0, 1e30, math.inf, -math.inf, math.nan, True, False, [], {}, ["a"], ["a", 1],
    [None], {"k": "v"}, {1: "v"}, ("a",), {"a"}, frozenset({"a"}), b"ab", b"\xff", datetime.date(2020, 1, 1),
    2**63 - 1, 9.2e18, -float(2**63), "9" * 30, Operation.VERIFY,
]
TYPES: list[tuple[Any, dict[str, Any]]] = [
    (str, {}), (int, {}), (float, {}), (bool, {}), (bool, {"strict": True}), (int, {"strict": True}),
    (int, {"ge": 1, "le": 65535}), (float, {"gt": 0}), (float, {"ge": 0, "le": 86400}), (str | list[str], {}),
    (list[str] | None, {}), (list[str], {"min_length": 1}), (dict[str, str], {}), (dict[str, Any], {}),
    (dict[str, list[str]], {}), (tuple[str, ...], {}), (Literal["systemd", "docker", "compose"], {}),
    (Literal["plan-only"] | None, {}), (str | None, {}), (Any, {}),
]


def _pydantic(hint: Any, own: dict[str, Any], value: Any) -> tuple[str, Any]:
    strict = own.pop("strict", None)
    adapter: TypeAdapter[Any] = TypeAdapter(hint if not own else _annotated(hint, own))
    try:
        return "ok", adapter.validate_python(value, strict=strict)
    except ValidationError as exc:
        return "errors", [(tuple(error["loc"]), error["type"], error["msg"]) for error in exc.errors()]


def _annotated(hint: Any, own: dict[str, Any]) -> Any:
    from typing import Annotated

    return Annotated[hint, Field(**own)]


def _ours(hint: Any, own: dict[str, Any], value: Any) -> tuple[str, Any]:
    errors: list[tuple[Loc, str, str]] = []
    result = check(hint, value, (), errors, rules(**own))
    return ("errors", errors) if errors else ("ok", result)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(("hint", "own"), TYPES, ids=[f"{hint}{own or ''}" for hint, own in TYPES])
def test_each_value_reads_as_pydantic_read_it(hint: Any, own: dict[str, Any]) -> None:
    different = []
    for value in VALUES:
        theirs, ours = _pydantic(hint, dict(own), value), _ours(hint, dict(own), value)
        if theirs[0] != ours[0] or (theirs[0] == "ok" and not _same(theirs[1], ours[1])) or (
                theirs[0] == "errors" and theirs[1] != ours[1]):
            different.append((value, theirs, ours))
    assert not different, "\n".join(f"{value!r}: pydantic {theirs} / ours {ours}" for value, theirs, ours in different)


def _theirs() -> type[BaseModel]:
    """pydantic's twin of Outer, with the same class names (they are in its messages)."""

    class Inner(BaseModel):
        model_config = ConfigDict(extra="forbid")
        flag: bool = Field(default=False, strict=True)
        paths: list[str] = Field(default_factory=list)

    class Outer(BaseModel):
        model_config = ConfigDict(extra="forbid", populate_by_name=True)
        name: str
        port: int = Field(default=22, ge=1, le=65535)
        body: dict[str, Any] = Field(default_factory=dict, alias="json")
        inner: Inner | None = None
        items: dict[str, Inner] = Field(default_factory=dict)

    return Outer


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner(Model):
    flag: bool = field(default=False, metadata=rules(strict=True))
    paths: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outer(Model):
    name: str
    port: int = field(default=22, metadata=rules(ge=1, le=65535))
    body: dict[str, Any] = field(default_factory=dict, metadata=rules(alias="json"))
    inner: Inner | None = None
    items: dict[str, Inner] = field(default_factory=dict)


MODELS = [{"name": "a"}, {}, None, [], "a", {"name": 1, "port": "x", "zz": 1, "json": [], "inner": 3},
          {"name": "a", "json": {"k": 1}, "json_body": 2}, {"name": "a", "body": {"k": 1}},
          {"name": "a", "inner": {"flag": 1, "paths": "p", "q": None}, "items": {"x": {"flag": True}, 2: [], "y": {}}},
          {"port": 0, "extra": 1, "other": 2}, {"name": "a", "items": {"k": {"paths": [1, "b", None]}}}]


@pytest.mark.parametrize("raw", MODELS, ids=range(len(MODELS)))
def test_a_model_reads_as_pydantic_read_it_every_problem_in_its_order(raw: Any) -> None:
    try:
        theirs: Any = _theirs().model_validate(raw).model_dump(by_alias=True)
    except ValidationError as exc:
        theirs = [(tuple(error["loc"]), error["type"], error["msg"]) for error in exc.errors()]
    try:
        ours: Any = Outer.model_validate(raw).model_dump(by_alias=True)
    except Invalid as exc:
        ours = [(error["loc"], error["type"], error["msg"]) for error in exc.errors()]
    assert ours == theirs


def test_a_model_built_in_code_is_validated_as_one_read_from_a_file() -> None:
    with pytest.raises(Invalid) as refused:  # a snapshot's manifest naming a relative dir (commands/restore/source.py)
        Backup(dir="srv/b", files={"../x": "/srv/x"})
    assert refused.value.errors() == [
        {"loc": ("dir",), "type": "value_error", "msg": "Value error, must be an absolute path, got 'srv/b'"},
        {"loc": ("files",), "type": "value_error",
         "msg": "Value error, file name '../x' must be a plain name inside the backup dir"}]
    assert Backup(dir="/srv/b/", files={"a": "/a"}).dir == "/srv/b"
    podman = Service(manager="podman", container="sglang", health_url="http://127.0.0.1:1/health")
    assert (podman.unit, podman.engine) == ("sglang", Engine(cli="podman"))
    with pytest.raises(Invalid, match="needs `container: NAME`"):
        Service(manager="docker", health_url="http://127.0.0.1:1/health")


def test_copy_and_dump() -> None:
    host = Host.model_validate({"name": "h", "address": "10.0.0.1", "ssh": {"user": "root"}})
    moved = host.model_copy(update={"port": 2222})
    assert (moved.port, host.port, moved.ssh is host.ssh) == (2222, 22, True)
    assert host.model_dump_json(include={"name", "port"}) == '{"name":"h","port":22}'
    line = host.model_dump_json()  # made once for a frozen model (the SSH pool asks at every connection)
    assert host.model_dump_json() is line and moved.model_dump_json() == line.replace('"port":22', '"port":2222')
    assert host.model_dump(include={"ssh"})["ssh"]["jump"] == []
    assert host != moved and host == host.model_copy()


def test_a_policy_built_in_code_reads_as_written() -> None:
    """The implicit policy names its operations by the vocabulary's StrEnum: its audit text says the plain words."""
    policy = implicit_policy(Approvals(approvers=["U1"]), ["C123"])
    assert policy.text() == ("targets: ['all'], operations: ['verify', 'restore', 'restart', 'ping'], "
                             "approvers: ['U1'], required: 1, channels: ['C123']")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Hop:  # settings.Hop's fields as a plain frozen slotted dataclass: what `model` must behave as
    name: str
    address: str
    port: int = field(metadata=rules(ge=1, le=65535))
    ssh: Any


def _raised(make: Any) -> tuple[type[BaseException], str]:
    try:
        make()
    except (TypeError, AttributeError) as exc:
        return type(exc), str(exc).replace("_Hop", "Hop")
    raise AssertionError("not raised")


def test_a_model_behaves_as_a_frozen_slotted_dataclass() -> None:
    """``model`` builds no per-class functions (commands/inventory/schema.py): init, equality, hash, repr, the
    refusal to assign or delete, copies and pickles are a frozen slotted keyword-only dataclass's."""
    import copy
    import dataclasses
    import pickle

    from commands.inventory.settings import FleetSettings, Hop, SshSettings

    ssh = SshSettings(user="admin")
    ours, theirs = Hop(name="b", address="10.0.0.9", port=22, ssh=ssh), _Hop(name="b", address="10.0.0.9", port=22,
                                                                           ssh=ssh)
    assert repr(ours) == repr(theirs).replace("_Hop", "Hop") and "SshSettings(user='admin'," in repr(ours)
    assert dataclasses.is_dataclass(ours) and not hasattr(ours, "__dict__")
    assert ours == Hop(name="b", address="10.0.0.9", port=22, ssh=SshSettings(user="admin"))
    assert ours != Hop(name="b", address="10.0.0.9", port=23, ssh=ssh) and ours != theirs
    assert ours.__eq__(theirs) is NotImplemented
    assert _raised(lambda: hash(ours)) == _raised(lambda: hash(theirs)) == (TypeError, "unhashable type: 'list'")
    fleet = FleetSettings(max_parallel=4)
    assert hash(fleet) == hash((4, 120, 1)) and len({fleet, fleet.model_copy(), FleetSettings(max_parallel=4)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):  # a frozen slotted dataclass's raised TypeError (3.11's)
        ours.other = 1  # type: ignore[attr-defined]
    for attempt in (lambda hop: setattr(hop, "port", 1), lambda hop: delattr(hop, "port")):
        with pytest.raises(dataclasses.FrozenInstanceError) as refused:
            attempt(ours)
        with pytest.raises(dataclasses.FrozenInstanceError) as expected:
            attempt(theirs)
        assert str(refused.value) == str(expected.value)
    for wrong in ({"address": "a", "port": 1, "ssh": ssh}, {"port": 1}, {}, {"name": "b", "nope": 1}):
        assert _raised(lambda wrong=wrong: Hop(**wrong)) == _raised(lambda wrong=wrong: _Hop(**wrong))
    for copied in (copy.copy(ours), copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert copied == ours and type(copied) is Hop and repr(copied) == repr(ours)
    assert dataclasses.replace(ours, port=2200).port == 2200 and ours.port == 22
    with pytest.raises(Invalid, match="greater than or equal to 1"):
        dataclasses.replace(ours, port=0)  # validated as built in code
