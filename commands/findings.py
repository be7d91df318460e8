"""What a check yields: a status, a one-line summary and the evidence behind it.

A failed check is data, not an exception. A check never passes without evidence, and
all evidence is trimmed, then redacted, when it is created, so nothing later can leak it:
trimming first bounds the redaction's CPU cost whatever a host prints. ``to_json`` redacts
the whole finding again (``commands.redact`` is the one layer), so what holds findings' JSON (a host's
result, a fleet's) need not walk it a second time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from commands.frozen import Frozen
from commands.redact import redact, redact_data
from commands.vocabulary import CheckStatus, Operation, Verdict

OUTPUT_LIMIT = 4000
EVENT_KEYS = frozenset({"name", "status", "summary", "evidence", "details", "next_step"})


def trim(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """Keep the head and tail of long output, saying how much was cut.

    Cuts fall on line ends where a line end is near, so a secret is not split in two
    halves that no redaction rule recognises any more.
    """
    if len(text) <= limit:
        return text
    head = text[: limit * 3 // 4]
    tail = text[-(limit // 4) :]
    head_cut, tail_cut = head.rfind("\n"), tail.find("\n")
    if head_cut > len(head) // 2:
        head = head[: head_cut + 1]
    if 0 <= tail_cut < len(tail) // 2:
        tail = tail[tail_cut + 1 :]
    return f"{head}\n… [{len(text) - len(head) - len(tail)} characters trimmed] …\n{tail}"


# Frozen dataclasses whose eq, hash and repr are Frozen's (commands/frozen.py): a verify loads this module cold.
@dataclass(frozen=True, eq=False, repr=False)
class Evidence(Frozen):
    command: str
    exit_status: int | None
    output: str
    duration_s: float

    @classmethod
    def of(cls, command: str, exit_status: int | None, output: str, duration_s: float) -> Evidence:
        return cls(redact(command), exit_status, redact(trim(output)), round(duration_s, 4))

    def to_json(self) -> dict[str, Any]:
        """Its fields by name (what ``dataclasses.asdict`` gave, without its deep copy of each field)."""
        return {"command": self.command, "exit_status": self.exit_status, "output": self.output,
                "duration_s": self.duration_s}


@dataclass(frozen=True, eq=False, repr=False)
class NextStep(Frozen):
    """What an operator would do next about a finding, in words and as a proofbot command.

    Front-ends say the command their way (``/restore ct129 pre-ddtree`` in Slack,
    ``proofbot restore ct129 pre-ddtree`` at a terminal); ``slack_choice`` and ``cli_flags``
    are the same choice in each (the "Approve + move extras" button, ``--move-extras``).
    """

    advice: str
    operation: Operation
    args: tuple[str, ...]
    slack_choice: str = ""
    cli_flags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"advice": self.advice, "operation": self.operation, "args": self.args,
                "slack_choice": self.slack_choice, "cli_flags": self.cli_flags}


@dataclass(frozen=True, eq=False, repr=False)
class Finding(Frozen):
    name: str
    status: CheckStatus
    summary: str
    evidence: Evidence | None = None
    details: dict[str, Any] = field(default_factory=dict)
    next_step: NextStep | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", CheckStatus(self.status))
        if self.status == CheckStatus.PASS and self.evidence is None:
            raise ValueError(f"check {self.name} cannot pass without evidence")
        # Summaries quote what hosts print (a reply, a cmdline): masked before any renderer sees them.
        object.__setattr__(self, "summary", redact(self.summary))

    def to_json(self) -> dict[str, Any]:
        """The finding as JSON, redacted whole (its name and evidence too): one walk over it, made once (the audit
        log and the output both ask); each call gets its own outer dict, as callers add and pop keys in it."""
        return dict(self._json)

    @functools.cached_property
    def _json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "evidence": self.evidence.to_json() if self.evidence else None,
        }
        if self.details:
            data["details"] = self.details
        if self.next_step:
            data["next_step"] = self.next_step.to_json()
        return redact_data(data)

    def to_event(self) -> dict[str, Any]:
        """The finding as a ``check`` or ``step`` event's details: its own details flattened in, so the
        audit DB never holds a ``details`` inside ``details`` (``$.live_sha256``, not ``$.details.live_sha256``
        in Datasette); a detail named like a top-level key keeps a ``detail_`` prefix."""
        data = self.to_json()
        for key, value in data.pop("details", {}).items():
            data[f"detail_{key}" if key in data or key in EVENT_KEYS else key] = value
        return data


def could_not_check(name: str, reason: str, evidence: Evidence | None = None,
                    details: dict[str, Any] | None = None) -> Finding:
    return Finding(name, CheckStatus.ERROR, reason, evidence, details or {})


def verdict_of(findings: list[Finding]) -> Verdict:
    """The verdict over findings (``Verdict.of_statuses``: a definite failure outranks a could-not-check)."""
    return Verdict.of_statuses(finding.status for finding in findings)
