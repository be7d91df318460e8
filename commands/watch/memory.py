"""What the watch remembers across a ``serve`` restart and between ``proofbot watch --once`` runs, read back from
the audit log alone: each host's confirmed state from its last ``watch-change``; from each entry's last
``watch-run``, the runs of results not yet confirmed, the changes held for the quiet hours' digest, and
since when the entry is watched. No table of its own: the log already holds it, and grows with changes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from commands.store.db import AuditStore
from commands.vocabulary import Change, EventKind, Verdict
from commands.watch.schedule import Watch
from commands.watch.state import HostChange, HostState, Result, TargetWatch

if TYPE_CHECKING:
    from commands.store.handle import Db

# The newest watch-run events read back, at most, to find each entry's last run (a quiet entry among busy
# ones is far back); past this an entry starts afresh, as on its first run.
RUNS_READ_MAX = 50_000
RUNS_PAGE = 500


def _moment(written: str) -> datetime:
    return datetime.fromisoformat(written.replace("Z", "+00:00"))


def _written(moment: datetime) -> str:
    return moment.isoformat()


def result_json(result: Result) -> dict[str, Any]:
    return {"verdict": str(result.verdict), "causes": sorted(result.causes)}


def result_of_json(written: Mapping[str, Any]) -> Result:
    return Result(Verdict(written["verdict"]), frozenset(str(cause) for cause in written.get("causes") or ()))


def pending_json(pending: Mapping[str, HostState]) -> dict[str, Any] | None:
    """Each host's run of results that may still replace what is confirmed: the result, how many, since when."""
    return {host: {**result_json(state.candidate), "streak": state.streak,
                   "since": _written(state.streak_since) if state.streak_since else None}
            for host, state in sorted(pending.items()) if state.candidate is not None} or None


def change_json(change: HostChange) -> dict[str, Any]:
    return {"host": change.host, "change": str(change.change), **result_json(change.now),
            "since": _written(change.since), **({"earlier": [change_json(step) for step in change.earlier]}
                                                if change.earlier else {})}


def change_of(written: Mapping[str, Any]) -> HostChange:
    """A change as ``change_json`` wrote it (``before`` is not kept)."""
    return HostChange(str(written["host"]), Change(written["change"]), None, result_of_json(written),
                      _moment(str(written["since"])), tuple(change_of(step) for step in written.get("earlier") or ()))


@dataclass
class Remembered:
    """One entry's state as the log last said it."""

    confirmed: dict[str, tuple[Result, datetime]] = field(default_factory=dict)  # host -> result, since
    pending: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    digest: list[HostChange] = field(default_factory=list)
    watching_since: datetime | None = None
    last_run: Mapping[str, Any] | None = None  # the last watch-run's details (counts, changed hosts)
    last_run_at: str | None = None

    def restore(self, watch: TargetWatch) -> None:
        """Put this back into a fresh ``TargetWatch``: a known failure is not said again, a pending one is kept."""
        for host, (result, since) in self.confirmed.items():
            watch.hosts[host] = HostState(result, since, result, watch.after, since)
        for host, written in self.pending.items():
            state = watch.hosts.get(host, HostState())
            began = written.get("since")
            watch.hosts[host] = HostState(state.confirmed, state.since, result_of_json(written), int(written["streak"]),
                                          _moment(str(began)) if began else None)
        watch.held = list(self.digest)
        watch.watching_since = self.watching_since


async def remembered(store: AuditStore, targets: Sequence[str]) -> dict[str, Remembered]:
    """Each target's state as the audit log holds it (a target never run: an empty one); SQLite or PostgreSQL."""
    return await store.snapshot(lambda db: _read(db, list(targets)))


def _read(db: Db, targets: list[str]) -> dict[str, Remembered]:
    found = {target: Remembered() for target in targets}
    changes = db.query(
        "SELECT c.host AS host, c.details AS change, r.details AS run FROM events c JOIN events r "
        "ON r.operation_id = c.operation_id AND r.kind = ? WHERE c.kind = ? ORDER BY c.id",
        [EventKind.WATCH_RUN, EventKind.WATCH_CHANGE])
    for row in changes:
        target = json.loads(row["run"]).get("target")
        if target in found and row["host"]:
            change = json.loads(row["change"])
            found[target].confirmed[str(row["host"])] = (result_of_json(change), _moment(str(change["since"])))
    missing = set(targets)
    for offset in range(0, RUNS_READ_MAX, RUNS_PAGE):  # newest first, a page at a time, until each is found
        page = list(db.query("SELECT at, details FROM events WHERE kind = ? ORDER BY at DESC, id DESC "
                             "LIMIT ? OFFSET ?", [EventKind.WATCH_RUN, RUNS_PAGE, offset]))
        for row in page:
            run = json.loads(row["details"])
            target = run.get("target")
            if target in missing:
                missing.discard(target)
                _take_up(found[target], run, str(row["at"]))
        if not missing or len(page) < RUNS_PAGE:
            break
    return found


def _take_up(memory: Remembered, run: Mapping[str, Any], at: str) -> None:
    memory.last_run, memory.last_run_at = run, at
    memory.pending = dict(run.get("pending") or {})
    memory.digest = [change_of(change) for change in run.get("digest") or ()]
    since = run.get("watching_since")
    memory.watching_since = _moment(since) if since else None


async def restore_watch(watch: Watch, store: AuditStore) -> None:
    """Every entry of ``watch`` as the log last left it (before its first run, in serve and in ``--once``)."""
    for target, memory in (await remembered(store, list(watch.states))).items():
        memory.restore(watch.states[target])
