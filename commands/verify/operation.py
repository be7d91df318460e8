"""The verify operation: every check of README "Checks" against one host, over one SSH connection.

Host-side facts are gathered in ONE exec round trip (service state, and what needs the main
PID, which the host-side script reads itself: see ``pid_steps``; hashes, the file listing and
package probes), with health fetched over an SSH channel meanwhile.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time

from commands.checks.cmdline import cmdline_finding
from commands.checks.deb import deb_argv, parse_deb
from commands.checks.files import file_hash_argv, parse_file_hash
from commands.checks.health import HttpOutcome, health_finding
from commands.checks.listing import extra_files_finding, listing_argv, listing_paths, parse_listing
from commands.checks.package import package_argv, parse_package
from commands.checks.service import main_pid_finding
from commands.checks.stale import parse_process_start, stale_finding
from commands.clock import utc_now
from commands.errors import CouldNotCheck
from commands.findings import Finding, could_not_check
from commands.inventory import Backup
from commands.operation import OnFinding, OperationResult, Origin, new_operation_id
from commands.ssh import BatchStep, HostConnection, connect
from commands.store.db import AuditStore
from commands.store.events import Event
from commands.store.kinds import Finished
from commands.store.log import audit_log
from commands.verify.next_steps import with_next_step
from commands.verify.pid_steps import (
    as_read,
    cmdline_step,
    pid_step,
    process_start_steps,
    shell_pid,
    state_step,
)
from commands.verify.plan import VerifyPlan
from commands.vocabulary import Operation


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
    # The request is written while the SSH handshake is in flight (a login, no command): every
    # command and every finding waits for it, so the log still says what was asked first.
    logged = asyncio.ensure_future(audit_log(audit, Operation.VERIFY, operation_id, host.name, origin.actor).requested(
        origin, backup=plan.backup_name, checks=plan.check_names(), fleet_operation_id=fleet_operation_id))
    try:
        return await _verified(plan, operation_id, started_at, started, logged, origin=origin, audit=audit,
                               on_finding=on_finding, deadline_s=deadline_s)
    finally:
        if not logged.done():
            await asyncio.gather(logged, return_exceptions=True)


async def _verified(plan: VerifyPlan, operation_id: str, started_at: str, started: float,
                    logged: asyncio.Future[Event], *, origin: Origin, audit: AuditStore,
                    on_finding: OnFinding | None, deadline_s: float | None) -> OperationResult:
    host = plan.host
    findings: list[Finding] = []
    stats = {"connections": 0, "exec_round_trips": 0}
    log = audit_log(audit, Operation.VERIFY, operation_id, host.name, origin.actor)

    async def found(finding: Finding) -> None:
        await logged
        finding = with_next_step(finding, plan)
        findings.append(finding)
        await log.check(finding)
        if on_finding:
            await on_finding(finding)

    async def checked() -> None:
        # httpx (health, probe) loads in a worker thread while SSH connects: nothing needs it sooner.
        http = asyncio.ensure_future(_load_host_http())
        try:
            async with connect(host) as conn:
                stats["connections"] += 1
                await logged
                await http
                try:
                    await _gather(plan, conn, found)
                finally:
                    stats["exec_round_trips"] = conn.exec_round_trips
        finally:
            if not http.done():
                http.cancel()  # the thread finishes the import by itself; nobody waits for it
            await asyncio.gather(http, return_exceptions=True)

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
    result = OperationResult(operation_id, Operation.VERIFY, host.name, started_at, time.monotonic() - started,
                             findings, stats=stats)
    await logged
    await log.finished(Finished.of(result))
    return result


async def _load_host_http() -> None:
    if "commands.host_http" not in sys.modules:
        await asyncio.to_thread(importlib.import_module, "commands.host_http")


async def _gather(plan: VerifyPlan, conn: HostConnection, found: OnFinding) -> None:
    """The host's facts, with the probe (one real request) sent meanwhile when the host has one."""
    from commands.host_http import run_probe  # loaded already (_load_host_http): a dict look-up

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


def host_batch(plan: VerifyPlan) -> tuple[list[BatchStep], int]:
    """Every host-side command of plan's verify, as the one batch runs them, and how many lead it for the service."""
    service, backup, packages = plan.host.service, plan.backup, plan.host.packages
    batch: list[BatchStep] = []
    if service:
        # The script reads the main PID itself, so cmdline and stat need no second round trip.
        batch += [state_step(service), pid_step(), cmdline_step()]
        batch += process_start_steps() if backup else []
    service_steps = len(batch)
    if backup:
        batch += [file_hash_argv(backup.backup_path(n), live) for n, live in backup.files.items()]
        batch.append(listing_argv(listing_paths(backup)))
    python = packages.python if packages else None
    # The package probes ride in the same round trip: they need nothing from the others.
    batch += [package_argv(python, dist) for dist in packages.dists] if packages and python else []
    batch += [deb_argv(name) for name in packages.deb] if packages else []
    return batch, service_steps


async def _host_facts(plan: VerifyPlan, conn: HostConnection, found: OnFinding) -> None:
    from commands.host_http import fetch_via_host  # loaded already (_load_host_http): a dict look-up

    service, backup = plan.host.service, plan.backup
    health_task: asyncio.Task[HttpOutcome] | None = None
    if service:
        health_task = asyncio.create_task(fetch_via_host(conn, service.health_url))
    packages = plan.host.packages
    python = packages.python if packages else None
    dists = packages.dists if packages and python else []  # the inventory refuses dists without python
    debs = packages.deb if packages else []
    try:
        batch, service_steps = host_batch(plan)
        results = await conn.run_batch(batch)
    except BaseException:
        if health_task:
            health_task.cancel()
        raise

    on_pid, rest = results[:service_steps], results[service_steps:]
    listing = None
    if backup and plan.backup_name:
        for name, live in backup.files.items():
            await found(parse_file_hash(name, plan.backup_name, backup.backup_path(name), live, rest.pop(0)))
        listing = parse_listing(rest.pop(0))
        if backup.watch:
            await found(extra_files_finding(plan.backup_name, backup, listing))
    tail = rest[len(rest) - len(dists) - len(debs):]
    if python:
        for dist, result in zip(dists, tail[: len(dists)], strict=True):
            await found(parse_package(python, dist, result))
    for name, result in zip(debs, tail[len(dists):], strict=True):
        await found(parse_deb(name, result))
    if not service or not health_task:
        return
    main_pid, state = main_pid_finding(service, on_pid[0])
    await found(main_pid)
    await found(health_finding(await health_task))

    pid = state.main_pid if state else None
    if pid is None:
        await found(could_not_check("cmdline", "no running main PID to read a command line from"))
        if listing is not None:
            await found(could_not_check("stale-process", "no running main PID to compare file times with"))
        return
    read_pid = shell_pid(on_pid[1])
    if read_pid != pid:
        why = (f"the host's script took main PID {read_pid or 'none'} from the manager's answer, "
               f"the parser PID {pid}: nothing read for it is judged")
        await found(could_not_check("cmdline", why))
        if listing is not None:
            await found(could_not_check("stale-process", why))
        return
    cmdline, *start_reads = as_read(pid, on_pid[2:])
    await found(cmdline_finding(service, pid, cmdline))
    if listing is not None and backup:
        start = parse_process_start(pid, *start_reads)
        files = [path for path in listing.mtimes if _watched(path, backup)]
        await found(stale_finding(start, files, listing, start_reads))


def _watched(path: str, backup: Backup) -> bool:
    return path in backup.files.values() or path.rsplit("/", 1)[0] in backup.watch
