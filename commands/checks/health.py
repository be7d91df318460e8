"""``health``: health_url answered 200 (the request itself is sent by ``commands.host_http``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from commands.checks.check import HttpCheck, HttpRequest
from commands.findings import Evidence, Finding
from commands.frozen import Frozen
from commands.vocabulary import CheckStatus

HEALTH_TIMEOUT_S = 5.0  # the whole request, body included, not each read
BODY_CAP_BYTES = 64 * 1024  # plenty to judge health or a probe; past it nothing is read or judged


class HttpOutcome(NamedTuple):  # immutable; a NamedTuple costs a fifth of a frozen dataclass to define
    """What one HTTP request from the host came back with.

    ``status`` is None unless the whole response arrived within the deadline and the body
    cap; ``problem`` then says why (no answer, slow drip, body too large, unreachable).
    """

    request: str
    status: int | None
    body: str
    elapsed_s: float
    problem: str = ""


def health_finding(outcome: HttpOutcome) -> Finding:
    shown = f"HTTP {outcome.status}\n{outcome.body}" if outcome.status is not None else outcome.problem
    evidence = Evidence.of(outcome.request, 0 if outcome.status is not None else None, shown, outcome.elapsed_s)
    details = {"http_status": outcome.status}
    if outcome.status == 200:
        return Finding("health", CheckStatus.PASS, f"200 in {outcome.elapsed_s * 1000:.0f} ms", evidence, details)
    if outcome.status is None:
        return Finding("health", CheckStatus.FAIL, outcome.problem, evidence, details)
    return Finding("health", CheckStatus.FAIL, f"answered {outcome.status}, not 200", evidence, details)


@dataclass(frozen=True, eq=False, repr=False)
class HealthCheck(HttpCheck, Frozen):
    """``health``: one GET of ``health_url`` from the host."""

    url: str

    @property
    def name(self) -> str:
        return "health"

    def request(self) -> HttpRequest:
        return HttpRequest(self.url, HEALTH_TIMEOUT_S)

    def parse(self, outcome: HttpOutcome) -> Finding:
        return health_finding(outcome)
