"""``probe``: one real request (the inventory's ``service.probe``), not just a health ping.

Sent over an SSH channel (commands.host_http), so it is what the host sees, once health answers 200. It
fails on a timeout, a non-2xx status, or a degenerate reply: empty, one character
repeated ("!!!!!!!!"), very few distinct characters, or one word over and over; and,
when ``expect`` is given, a reply without that substring. The reply is read from an
OpenAI-style chat or text completion when the body is one, else the body itself.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from commands.checks.check import HttpCheck, HttpRequest
from commands.checks.health import HttpOutcome
from commands.findings import Evidence, Finding
from commands.frozen import Frozen
from commands.inventory import Probe
from commands.vocabulary import CheckStatus

REPLY_SHOWN = 200
LOW_VARIETY_MIN_LENGTH = 12
LOW_VARIETY_MAX_DISTINCT = 3
REPEATED_WORD_MIN_WORDS = 6
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def probe_headers(probe: Probe) -> tuple[dict[str, str], list[str]]:
    """The probe's headers with ``${NAME}`` read from the environment, and the names that are unset."""
    missing: list[str] = []

    def expand(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if value is None:
            missing.append(match.group(1))
            return ""
        return value

    return {key: _ENV_REFERENCE.sub(expand, value) for key, value in probe.headers.items()}, missing


def request_text(probe: Probe, outcome_request: str) -> str:
    """What was sent, as evidence: the request line and the JSON body (redacted later by Evidence)."""
    body = json.dumps(probe.json_body, ensure_ascii=False, sort_keys=True)
    return f"{outcome_request}\n{body}"


def reply_text(body: str) -> str:
    """The generated text of an OpenAI-style chat/text completion, else the raw body."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        return body
    if isinstance(data, dict) and isinstance(data.get("choices"), list) and data["choices"]:
        choice = data["choices"][0]
        if isinstance(choice, dict):
            message = choice.get("message")
            if isinstance(message, dict):
                content = message.get("content")
                return content if isinstance(content, str) else ""
            if isinstance(choice.get("text"), str):
                return str(choice["text"])
    return body


def degenerate(reply: str) -> str | None:
    """Why a reply is not a real answer, or None when it looks like one."""
    text = reply.strip()
    if not text:
        return "empty reply"
    if len(text) >= 2 and len(set(text)) == 1:
        return f"one character repeated: {text[:1]!r} {len(text)} times"
    distinct = set(text)
    if len(text) >= LOW_VARIETY_MIN_LENGTH and len(distinct) <= LOW_VARIETY_MAX_DISTINCT:
        return f"very low character variety: {len(distinct)} distinct characters in {len(text)}"
    words = text.split()
    if len(words) >= REPEATED_WORD_MIN_WORDS and len(set(words)) == 1:
        return f"one word repeated: {words[0][:20]!r} {len(words)} times"
    return None


def probe_finding(probe: Probe, outcome: HttpOutcome) -> Finding:
    """Judge one probe answer; health already said 200, so a failure here is said against it."""
    latency_ms = outcome.elapsed_s * 1000
    command = request_text(probe, outcome.request)
    if outcome.status is None:
        evidence = Evidence.of(command, None, outcome.problem, outcome.elapsed_s)
        return Finding("probe", CheckStatus.FAIL, f"health answers 200 but a real request failed: {outcome.problem}",
                       evidence, {"latency_ms": round(latency_ms)})
    reply = reply_text(outcome.body)
    shown = reply.strip()[:REPLY_SHOWN]
    output = f"HTTP {outcome.status} in {latency_ms:.0f} ms\nreply: {shown!r}\n\n{outcome.body}"
    evidence = Evidence.of(command, 0, output, outcome.elapsed_s)
    details = {"http_status": outcome.status, "latency_ms": round(latency_ms), "reply": shown}
    if not 200 <= outcome.status < 300:
        return Finding("probe", CheckStatus.FAIL, f"health answers 200 but a real request got HTTP {outcome.status}",
                       evidence, details)
    problem = degenerate(reply)
    if problem:
        return Finding("probe", CheckStatus.FAIL, f"health answers 200 but the real reply is degenerate: {problem}",
                       evidence, details)
    if probe.expect is not None and probe.expect not in reply:
        return Finding("probe", CheckStatus.FAIL,
                       f"health answers 200 but the real reply lacks {probe.expect!r}: {shown[:60]!r}",
                       evidence, details)
    expected = f", contains {probe.expect!r}" if probe.expect is not None else ""
    return Finding("probe", CheckStatus.PASS,
                   f"answered in {latency_ms:.0f} ms: {shown[:60]!r}{expected}", evidence, details)


@dataclass(frozen=True, eq=False, repr=False)
class ProbeCheck(HttpCheck, Frozen):
    """``probe``: the inventory's real request; ``send`` False reports it ``skipped``, never sent."""

    probe: Probe
    send: bool = True

    @property
    def name(self) -> str:
        return "probe"

    def request(self) -> HttpRequest | Finding:
        if not self.send:
            return Finding("probe", CheckStatus.SKIPPED, f"not sent (asked not to): POST {self.probe.url}")
        headers, missing = probe_headers(self.probe)
        if missing:
            names = ", ".join(f"${{{name}}}" for name in missing)
            return Finding("probe", CheckStatus.ERROR, f"not sent: {names} not set in proofbot's environment",
                           Evidence.of(f"POST {self.probe.url}", None, "", 0.0))
        return HttpRequest(self.probe.url, self.probe.timeout_s, "POST", self.probe.json_body, headers)

    def parse(self, outcome: HttpOutcome) -> Finding:
        return probe_finding(self.probe, outcome)
