"""The one batch runner: a list of checks (and the facts they read) over one host connection, in ONE exec
round trip, with each HTTP check sent over an SSH channel meanwhile. Findings come back per check, each
with the evidence of its own commands; a check's steps are matched to their results here and nowhere else.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from commands.checks.check import AnyCheck, Check, Fact, HttpCheck, HttpRequest, Read, Script, Step
from commands.command_result import CommandResult
from commands.findings import Finding
from commands.ssh import BatchStep, HostConnection, ShellStep


def batch_of(items: Sequence[Fact]) -> list[BatchStep]:
    """Every host-side step of the facts and checks, as the one batch runs them."""
    return [as_batch_step(step) for item in _unique(items) for step in item.steps()]


async def read_facts(conn: HostConnection, items: Sequence[Fact]) -> dict[str, tuple[CommandResult, ...]]:
    """Run every item's steps in one batch; each item's results, by its name."""
    unique = _unique(items)
    steps = [item.steps() for item in unique]
    results = await conn.run_batch([as_batch_step(step) for each in steps for step in each])
    by_name: dict[str, tuple[CommandResult, ...]] = {}
    start = 0
    for item, own in zip(unique, steps, strict=True):
        by_name[item.name] = tuple(results[start:start + len(own)])
        start += len(own)
    return by_name


def parse(check: Check, by_name: dict[str, tuple[CommandResult, ...]]) -> Finding:
    return check.parse(Read(by_name[check.name], {name: by_name[name] for name in check.needs}))


async def ask(conn: HostConnection, check: HttpCheck, request: HttpRequest | Finding | None = None) -> Finding:
    """Send one HTTP check from the host (its ``request()``, or ``request`` made for it) and parse its answer."""
    from commands.host_http import fetch_via_host  # httpx loads only when a request is sent

    request = check.request() if request is None else request
    if isinstance(request, Finding):
        return request
    outcome = await fetch_via_host(conn, request.url, method=request.method, json_body=request.json_body,
                                   timeout_s=request.timeout_s, headers=request.headers or None)
    return check.parse(outcome)


class FindingGroup(list[Finding]):
    """Findings known together; ``last``: no finding comes after them (the caller may record them with its ending)."""

    last = False


async def run_checks(conn: HostConnection, checks: Sequence[AnyCheck], facts: Sequence[Fact] = ()
                     ) -> AsyncIterator[Finding]:
    """Each check's finding, in the order of ``checks``, as soon as it is known (see ``finding_groups``)."""
    async for group in finding_groups(conn, checks, facts):
        for finding in group:
            yield finding


async def finding_groups(conn: HostConnection, checks: Sequence[AnyCheck], facts: Sequence[Fact] = ()
                         ) -> AsyncIterator[FindingGroup]:
    """Every check's finding, in the order of ``checks``, in groups of those known together: the HTTP
    checks are sent when the batch starts (one whose ``needs`` change its request is sent again after the
    batch), and each is awaited at its place in the order. A group ends only where an HTTP check's answer
    has not come yet, so a caller can log a group at once (one audit transaction) without holding back
    anything it could have shown sooner; the group after which none comes is marked ``last``."""
    batch = [*facts, *(check for check in checks if isinstance(check, Check))]
    asked = {check.name: asyncio.ensure_future(ask(conn, check)) for check in checks if isinstance(check, HttpCheck)}
    replaced: list[asyncio.Future[Finding]] = []
    try:
        by_name = await read_facts(conn, batch) if batch else {}
        for check in checks:  # what the batch read may change an HTTP check's request: then it is sent again
            if isinstance(check, HttpCheck) and check.needs:
                instead = check.request_from(Read((), {name: by_name[name] for name in check.needs}))
                if instead is not None:
                    replaced.append(asked[check.name])
                    replaced[-1].cancel()
                    asked[check.name] = asyncio.ensure_future(ask(conn, check, instead))
        group = FindingGroup()
        for check in checks:
            answer = None if isinstance(check, Check) else asked[check.name]
            if answer is not None and not answer.done() and group:
                yield group
                group = FindingGroup()
            try:
                group.append(parse(check, by_name) if isinstance(check, Check) else await asked[check.name])
            except Exception:
                if group:  # what was known before the failure is shown and logged, as one by one
                    yield group
                raise
        if group:
            group.last = True
            yield group
    finally:
        for task in asked.values():
            if not task.done():
                task.cancel()
        await asyncio.gather(*asked.values(), *replaced, return_exceptions=True)


async def findings_of(conn: HostConnection, checks: Sequence[AnyCheck], facts: Sequence[Fact] = ()
                      ) -> dict[str, Finding]:
    """Every check's finding, by check name."""
    return {finding.name: finding async for finding in run_checks(conn, checks, facts)}


def _unique(items: Sequence[Fact]) -> list[Fact]:
    """Each item once, in the order given, except that an item's steps come after those of what it needs."""
    seen: dict[str, Fact] = {}
    for item in items:
        if item.name in seen and seen[item.name] != item:
            raise ValueError(f"two different facts or checks named {item.name}")
        seen.setdefault(item.name, item)
    ordered: dict[str, Fact] = {}

    def place(item: Fact, path: tuple[str, ...]) -> None:
        if item.name in ordered:
            return
        if item.name in path:
            raise ValueError(f"checks that need each other: {' -> '.join((*path, item.name))}")
        for name in item.needs:
            if name not in seen:
                raise ValueError(f"{item.name} needs {name}, which the plan does not read")
            place(seen[name], (*path, item.name))
        ordered[item.name] = item

    for item in seen.values():
        place(item, ())
    return list(ordered.values())


def as_batch_step(step: Step) -> BatchStep:
    return ShellStep(step.text, step.shown) if isinstance(step, Script) else step
