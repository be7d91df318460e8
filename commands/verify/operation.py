"""The verify operation: every check of README "Checks" against one host, over one SSH connection.

Host-side facts are gathered in two exec round trips (service state, hashes and the file
listing; then what needs the main PID), with health fetched over an SSH channel meanwhile.
"""

from __future__ import annotations

import asyncio
import time

from commands.checks.cmdline import cmdline_argv, cmdline_finding
from commands.checks.deb import deb_argv, parse_deb
from commands.checks.files import file_hash_argv, parse_file_hash
from commands.checks.health import HttpOutcome, health_finding
from commands.checks.listing import extra_files_finding, listing_argv, listing_paths, parse_listing
from commands.checks.package import package_argv, parse_package
from commands.checks.service import ServiceState, main_pid_finding, service_state_argv
from commands.checks.stale import parse_process_start, process_start_argvs, stale_finding
from commands.errors import CouldNotCheck
from commands.findings import Finding, could_not_check
from commands.host_http import fetch_via_host, run_probe
from commands.inventory import Backup
from commands.operation import OnFinding, OperationResult, Origin, new_operation_id, utc_now
from commands.ssh import HostConnection, connect
from commands.store.events import AuditStore
from commands.verify.next_steps import with_next_step
from commands.verify.plan import VerifyPlan


async def verify(plan: VerifyPlan, *, origin: Origin, audit: AuditStore,
                 on_finding: OnFinding | None = None, deadline_s: float | None = None,
                 fleet_operation_id: str | None = None) -> OperationResult:
    """Run every planned check, record each in the audit log, and return the result.

    With ``deadline_s`` the host's whole verify (connecting included) ends by then: what it
    had shown stays, every check not yet done is ``error`` "timed out after N s". A verify
    that is part of a fleet operation names it (``fleet_operation_id``) in its request.
    """
    operation_id = new_operation_id()
    started_at, started = utc_now(), time.monotonic()
    host = plan.host
    requested: dict[str, object] = {"backup": plan.backup_name, "checks": plan.check_names(),
                                    "origin": origin.to_json()}
    if fleet_operation_id:
        requested["fleet_operation_id"] = fleet_operation_id
    await audit.append("requested", operation_id=operation_id, operation="verify", host=host.name,
                       actor=origin.actor, details=requested)
    findings: list[Finding] = []
    stats = {"connections": 0, "exec_round_trips": 0}

    async def found(finding: Finding) -> None:
        finding = with_next_step(finding, plan)
        findings.append(finding)
        await audit.append("check", operation_id=operation_id, operation="verify", host=host.name,
                           actor=origin.actor, details=finding.to_event())
        if on_finding:
            await on_finding(finding)

    async def checked() -> None:
        async with connect(host) as conn:
            stats["connections"] += 1
            try:
                await _gather(plan, conn, found)
            finally:
                stats["exec_round_trips"] = conn.exec_round_trips

    cause: str | None = None
    try:
        if deadline_s is None:
            await checked()
        else:
            async with asyncio.timeout(deadline_s):
                await checked()
    except CouldNotCheck as exc:
        cause = f"could not check: {exc}"
    except TimeoutError:
        cause = f"timed out after {deadline_s:g} s (fleet.host_deadline_s)"
    if cause is not None:
        done = {finding.name for finding in findings}
        left = [name for name in plan.check_names() if name not in done]
        for index, name in enumerate(left):  # the cause is said once, on the first check it stopped
            await found(could_not_check(name, cause if index == 0 else
                                        f"not checked: the same cause as `{left[0]}`"))
    result = OperationResult(operation_id, "verify", host.name, started_at, time.monotonic() - started,
                             findings, stats=stats)
    await audit.append("finished", operation_id=operation_id, operation="verify", host=host.name,
                       actor=origin.actor,
                       details={"verdict": result.verdict, "duration_s": round(result.duration_s, 3),
                                "statuses": {f.name: f.status for f in findings}})
    return result


async def _gather(plan: VerifyPlan, conn: HostConnection, found: OnFinding) -> None:
    """The host's facts, with the probe (one real request) sent meanwhile when the host has one."""
    probe = plan.host.service.probe if plan.host.service else None
    sent = asyncio.create_task(run_probe(conn, probe)) if probe and plan.send_probe else None
    try:
        await _host_facts(plan, conn, found)
        if sent is not None:
            await found(await sent)
        elif probe is not None:
            await found(Finding("probe", "skipped", f"not sent (asked not to): POST {probe.url}"))
    finally:
        if sent is not None and not sent.done():
            sent.cancel()
            await asyncio.gather(sent, return_exceptions=True)


async def _host_facts(plan: VerifyPlan, conn: HostConnection, found: OnFinding) -> None:
    service, backup = plan.host.service, plan.backup
    health_task: asyncio.Task[HttpOutcome] | None = None
    if service:
        health_task = asyncio.create_task(fetch_via_host(conn, service.health_url))
    try:
        first_round: list[list[str]] = []
        if service:
            first_round.append(service_state_argv(service))
        if backup:
            first_round += [file_hash_argv(backup.backup_path(n), live) for n, live in backup.files.items()]
            first_round.append(listing_argv(listing_paths(backup)))
        packages = plan.host.packages
        python = packages.python if packages else None
        dists = packages.dists if packages and python else []  # the inventory refuses dists without python
        debs = packages.deb if packages else []
        # The package probes ride in the first round trip: they need nothing from the others.
        first_round += [package_argv(python, dist) for dist in dists] if python else []
        first_round += [deb_argv(name) for name in debs]
        results = await conn.run_batch(first_round)
    except BaseException:
        if health_task:
            health_task.cancel()
        raise

    state: ServiceState | None = None
    position = 0
    if service:
        main_pid, state = main_pid_finding(service, results[0])
        position = 1
    listing = None
    if backup and plan.backup_name:
        for name, live in backup.files.items():
            await found(parse_file_hash(name, plan.backup_name, backup.backup_path(name), live, results[position]))
            position += 1
        listing = parse_listing(results[position])
        if backup.watch:
            await found(extra_files_finding(plan.backup_name, backup, listing))
    tail = results[len(results) - len(dists) - len(debs):]
    if python:
        for dist, result in zip(dists, tail[: len(dists)], strict=True):
            await found(parse_package(python, dist, result))
    for name, result in zip(debs, tail[len(dists):], strict=True):
        await found(parse_deb(name, result))
    if not service or not health_task:
        return
    await found(main_pid)
    await found(health_finding(await health_task))

    pid = state.main_pid if state else None
    if pid is None:
        await found(could_not_check("cmdline", "no running main PID to read a command line from"))
        if listing is not None:
            await found(could_not_check("stale-process", "no running main PID to compare file times with"))
        return
    second = await conn.run_batch([cmdline_argv(pid), *process_start_argvs(pid)])
    await found(cmdline_finding(service, pid, second[0]))
    if listing is not None and backup:
        start = parse_process_start(pid, *second[1:4])
        files = [path for path in listing.mtimes if _watched(path, backup)]
        await found(stale_finding(start, files, listing, second[1:4]))


def _watched(path: str, backup: Backup) -> bool:
    return path in backup.files.values() or path.rsplit("/", 1)[0] in backup.watch
