"""The audit log's writers: one per event kind, each building its kind's dataclass (commands/store/kinds.py); the
kinds a verify never writes (kinds_other.py) load with their writer's first use.

An ``AuditLog`` is bound to what every event of one operation shares (operation, id, host, actor); its
async writers append one event each in their own transaction. ``Within`` is the same log inside a
transaction the caller holds (``store.write``), for the events written together with a change to
another table: a decision with the plan's state, an expiry, a lock freed, an interruption.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from commands import observe
from commands.errors import CouldNotRecord
from commands.frozen import Frozen
from commands.store.events import Event, append_event, plain
from commands.store.kinds import Check, EventBody, Finished, Requested
from commands.vocabulary import EventKind, Operation

T = TypeVar("T")
CUT_OFF_MAX = 10_000  # operation ids kept as stopped by a write not taken (store.cut_off)

if TYPE_CHECKING:
    from commands.findings import Finding
    from commands.operation import Origin
    from commands.store.db import AuditStore
    from commands.store.handle import Db
    from commands.store.kinds_other import Refusal, Vote, WatchChange, WatchRun

PROOFBOT = "proofbot"  # the actor of what proofbot does on its own (expiry, recovery, its own life)


@dataclass(frozen=True, eq=False, repr=False)
class Subject(Frozen):
    """The columns an event carries besides its kind and details."""

    operation: str | None = None
    operation_id: str | None = None
    host: str | None = None
    actor: str | None = None

    def append(self, db: Db, body: EventBody, details: dict[str, Any] | None = None) -> Event:
        return append_event(db, body.KIND, operation_id=self.operation_id, operation=self.operation,
                            host=self.host, actor=self.actor, details=plain(body.details()) if details is None
                            else details)


@dataclass(frozen=True, eq=False, repr=False)
class Within(Subject):
    """The writers of the events written inside the caller's transaction."""

    db: Db | None = None  # the transaction's handle, when written within one

    def _write(self, body: EventBody) -> Event:
        assert self.db is not None, "Within writes inside the caller's transaction: it is given its db"
        return self.append(self.db, body)

    def approved(self, plan_hash: str, requested_by: str, reason: str | None = None, *,
                 policy: Mapping[str, Any] | None = None, approvals: list[str] | None = None) -> Event:
        from commands.store.kinds_other import Approved

        return self._write(Approved(plan_hash, requested_by, reason, policy, approvals))

    def vote(self, vote: Vote) -> Event:
        return self._write(vote)

    def rejected(self, plan_hash: str, requested_by: str, reason: str | None = None, *,
                 policy: Mapping[str, Any] | None = None, approvals: list[str] | None = None) -> Event:
        from commands.store.kinds_other import Rejected

        return self._write(Rejected(plan_hash, requested_by, reason, policy, approvals))

    def expired(self, expired_at: str, clicked_by: str | None = None) -> Event:
        from commands.store.kinds_other import Expired

        return self._write(Expired(expired_at, clicked_by))

    def refused(self, refusal: Refusal) -> Event:
        return self._write(refusal)

    def cancelled(self, reason: str, plan_hash: str | None = None) -> Event:
        from commands.store.kinds_other import Cancelled

        return self._write(Cancelled(reason, plan_hash))

    def finished(self, ending: Finished) -> Event:
        return self._write(ending)

    def lock_released_stale(self, reason: str, holder: Mapping[str, Any], released_for: str | None = None) -> Event:
        from commands.store.kinds_other import LockReleasedStale

        return self._write(LockReleasedStale(reason, holder, released_for))


@dataclass(frozen=True, eq=False, repr=False)
class AuditLog(Subject):
    """The writers of one operation's events (or of the bot's own, with no operation)."""

    store: Any = None  # AuditStore

    def within(self, db: Db) -> Within:
        return Within(self.operation, self.operation_id, self.host, self.actor, db=db)

    async def _write(self, body: EventBody) -> Event:
        details = plain(body.details())  # as it is now: a caller's dict may change before the worker runs
        # A stale lock freed for another operation is that one's act, never the stopped operation's own.
        return await self._recorded(lambda db: self.append(db, body, details),
                                    its_own=body.KIND != EventKind.LOCK_RELEASED_STALE)

    async def _recorded(self, work: Callable[[Db], T], its_own: bool = True) -> T:
        observe.working_on(self.operation_id, self.host)  # this task's log lines name the operation from now on
        store: AuditStore = self.store
        first = store.cut_off.get(self.operation_id) if its_own and self.operation_id is not None else None
        if first is not None:
            # Its run ended at its first write not taken: it acts and records nothing more (no second ending
            # beside the one settle_unrecorded writes, however the caller handles the error). What it says is
            # that first failure's cause: a caller writing its ending on the way out says why it stopped.
            raise CouldNotRecord(f"operation {self.operation_id} already failed to record a step ({first.message}): "
                                 "it is stopped here and finished interrupted once the database takes writes again",
                                 hint=first.hint)
        try:
            return await store.write(work)
        except CouldNotRecord as failed:
            if self.operation_id is not None:  # finished (interrupted) once the database is back
                store.unrecorded.setdefault(self.operation_id, (self.operation, self.host))
                store.cut_off[self.operation_id] = failed
                while len(store.cut_off) > CUT_OFF_MAX:  # bounded: the oldest, long settled, go first
                    del store.cut_off[next(iter(store.cut_off))]
            raise

    async def requested(self, origin: Origin, **facts: Any) -> Event:
        return await self._write(Requested.of(origin, **facts))

    async def plan_shown(self, plan: Mapping[str, Any]) -> Event:
        from commands.store.kinds_other import PlanShown

        return await self._write(PlanShown(plan))

    async def check(self, finding: Finding) -> Event:
        return await self._write(Check.of(finding))

    async def checks(self, findings: Sequence[Finding], ending: Finished | None = None) -> list[Event]:
        """One event per finding, in order, in ONE transaction: findings that arrive together (a batch's)
        cost one thread hop and one COMMIT, not one each; the chain is the same as written one by one.
        ``ending``: the operation's ``finished``, after them in the same transaction (the last findings of a verify,
        known after everything it did on the host)."""
        if not findings and ending is None:
            return []
        bodies: list[EventBody] = [Check.of(finding) for finding in findings]
        if ending is not None:
            bodies.append(ending)
        details = [plain(body.details()) for body in bodies]
        return await self._recorded(lambda db: [self.append(db, body, each)
                                                for body, each in zip(bodies, details, strict=True)])

    async def step(self, step: str | Finding, **facts: Any) -> Event:
        """A named moment (``step("ready", ready_after_s=…)``) or a finding (a restore's written file)."""
        from commands.store.kinds_other import Step

        return await self._write(Step(step, facts) if isinstance(step, str) else Step(extra=step.to_event()))

    async def finished(self, ending: Finished) -> Event:
        return await self._write(ending)

    async def refused(self, refusal: Refusal) -> Event:
        return await self._write(refusal)

    async def cancelled(self, reason: str, plan_hash: str | None = None) -> Event:
        from commands.store.kinds_other import Cancelled

        return await self._write(Cancelled(reason, plan_hash))

    async def interrupted(self, reason: str, *, what_is_known: Any = None,
                          outcomes: Mapping[str, str] | None = None) -> Event:
        from commands.store.kinds_other import Interrupted

        return await self._write(Interrupted(reason, what_is_known, outcomes))

    async def lock_released_stale(self, reason: str, holder: Mapping[str, Any],
                                  released_for: str | None = None) -> Event:
        from commands.store.kinds_other import LockReleasedStale

        return await self._write(LockReleasedStale(reason, holder, released_for))

    async def viewed(self, limit: int, origin: Origin, listed: list[str]) -> Event:
        from commands.store.kinds_other import Viewed

        return await self._write(Viewed(limit, origin.to_json(), listed))

    async def bot_started(self, mode: str, hosts: list[str]) -> Event:
        from commands.store.kinds_other import BotStarted

        return await self._write(BotStarted(mode, hosts))

    async def bot_stopped(self) -> Event:
        from commands.store.kinds_other import BotStopped

        return await self._write(BotStopped())

    async def slack_left_out(self, channel: str, thread_ts: str | None, text: str) -> Event:
        from commands.store.kinds_other import SlackLeftOut

        return await self._write(SlackLeftOut(channel, thread_ts, text[:200]))

    async def watch_run(self, run: WatchRun) -> Event:
        return await self._write(run)

    async def watch_change(self, change: WatchChange) -> Event:
        return await self._write(change)


def audit_log(store: AuditStore, operation: Operation | str | None = None, operation_id: str | None = None,
              host: str | None = None, actor: str | None = None) -> AuditLog:
    """The log of one operation (``operation_id``) on ``host`` by ``actor``, or of a request refused
    before it became one (no id)."""
    return AuditLog(operation, operation_id, host, actor, store=store)


def bot_log(store: AuditStore) -> AuditLog:
    """The log of the bot's own life (started, stopped): no operation, proofbot the actor."""
    return AuditLog(actor=PROOFBOT, store=store)

