"""A check as an object (in the spirit of pyinfra's facts): its name, what it runs on the host, and a pure
parse of what came back into a ``Finding``. A plan is a list of checks; ``commands.verify.runner`` runs it.

Three shapes: a ``Fact`` is read on the host for checks to parse and yields no finding of its own (the
file listing, the main PID the host-side script read); a ``Check`` is a fact that parses its own output
(and, by name, the output of the facts and checks it ``needs``) into a finding; an ``HttpCheck`` is a
request the host makes (over an SSH channel) and a pure parse of its answer. Nothing is paired by position:
the runner hands each parse exactly what its own steps printed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from commands.command_result import CommandResult
from commands.findings import Finding
from commands.frozen import Frozen

if TYPE_CHECKING:
    from commands.checks.health import HttpOutcome


@dataclass(frozen=True, eq=False, repr=False)
class Script(Frozen):
    """Shell text of proofbot's own, run in the batch's own shell so a variable it sets is there for the
    steps after it (``commands.ssh.ShellStep``); ``shown`` is the command its result and errors name."""

    text: str
    shown: str


Step = Sequence[str] | Script  # an argv (run as shlex.join of it) or one of proofbot's fixed scripts


class Read(NamedTuple):
    """What came back for one check: its own steps' results, in the order of its steps, and the results
    of each fact or check it needs, by name (immutable; a NamedTuple costs a fifth of a frozen dataclass to define)."""

    own: tuple[CommandResult, ...]
    needed: Mapping[str, tuple[CommandResult, ...]] = MappingProxyType({})

    def of(self, name: str) -> tuple[CommandResult, ...]:
        return self.needed[name]


class Fact(ABC):
    """Something read on the host for checks to parse; it has a name and its steps, no finding."""

    # The facts or checks whose steps run before this one's in the batch (a script may read a shell variable
    # theirs set), and whose results a check's ``parse`` reads besides its own.
    needs: ClassVar[tuple[str, ...]] = ()

    @property
    @abstractmethod
    def name(self) -> str:
        """What the plan, the audit log and the other checks call it."""

    @abstractmethod
    def steps(self) -> list[Step]:
        """What runs on the host, in one batch with every other fact and check of the plan."""


class Check(Fact):
    """A fact with a verdict: ``parse`` is pure (recorded output in, finding out)."""

    @abstractmethod
    def parse(self, read: Read) -> Finding:
        """The finding from what this check's steps (and what it needs) printed."""


class HttpRequest(NamedTuple):
    """One request the host makes, as ``commands.host_http.fetch_via_host`` sends it (immutable, headers too; a
    NamedTuple costs a fifth of a frozen dataclass to define)."""

    url: str
    timeout_s: float
    method: str = "GET"
    json_body: object | None = None
    headers: Mapping[str, str] = MappingProxyType({})


class HttpCheck(ABC):
    """A check that is one HTTP request seen from the host (health, the probe), not a batch step."""

    # The facts or checks whose results may change the request (a container's address from its inspect): the
    # request is still sent as the batch starts, and ``request_from`` may replace it once they are read.
    needs: ClassVar[tuple[str, ...]] = ()

    @property
    @abstractmethod
    def name(self) -> str:
        """The check's name."""

    @abstractmethod
    def request(self) -> HttpRequest | Finding:
        """What to send; a finding instead when it must not be sent (it says why)."""

    def request_from(self, read: Read) -> HttpRequest | Finding | None:
        """What to send instead, made from what its ``needs`` read (``read.needed``); None: the request sent as
        the batch started stands (the default)."""
        return None

    @abstractmethod
    def parse(self, outcome: HttpOutcome) -> Finding:
        """The finding from the answer (or the lack of one)."""


AnyCheck = Check | HttpCheck

# A check class that adds no field to the dataclass it extends (one manager's main-pid, a container's stale-process) is
# declared ``@dataclass(frozen=True, init=False, repr=False, eq=False)``: its parent's __init__, __repr__, __eq__ and
# __hash__ already serve it exactly (each works from the instance's own class and the same fields), and frozen=True
# still gives it its own guard against any assignment. Each method not generated again is one compile fewer at import.


@dataclass(frozen=True, eq=False, repr=False)
class Reads(Fact, Frozen):
    """A named set of reads with no parser of its own (a restore plan's reads of one file): its results
    come back under its name, in the order of its steps."""

    label: str
    argvs: tuple[Step, ...]

    @property
    def name(self) -> str:
        return self.label

    def steps(self) -> list[Step]:
        return list(self.argvs)
