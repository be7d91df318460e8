"""Leases on locks and plans: each row names the process that holds it (``lease_holder``, one id per process)
and when its hold ends (``lease_expires``, epoch seconds). A live process renews its leases every third of
the lease from a thread of its own, whatever its event loop is doing; a dead one's expire, wherever it ran,
and another process may then release its lock (commands/store/locks.py) or adopt its pending plan here.

30 s: long enough that a database hiccup or a slow transaction never costs a live holder its lease (it
renews every 10 s), short enough that a dead replica's host is free again within half a minute.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from commands.vocabulary import PlanState

if TYPE_CHECKING:
    from commands.store.handle import Db

LEASE_S = 30.0
RENEW_EVERY_S = LEASE_S / 3
LEASED = ("locks", "plans")
_holders: dict[int, str] = {}
log = logging.getLogger(__name__)


def process_holder() -> str:
    """This process's holder id (machine, PID and a random part: a reused PID is another holder)."""
    pid = os.getpid()  # per PID: a forked child is a holder of its own
    if pid not in _holders:
        _holders[pid] = f"{socket.gethostname()}:{pid}:{secrets.token_hex(4)}"
    return _holders[pid]


def lease_until(now: float | None = None) -> float:
    return (time.time() if now is None else now) + LEASE_S


def lease_expired(lease_expires: float | None, now: float | None = None) -> bool:
    """A row written before leases (None) has none to expire."""
    return lease_expires is not None and lease_expires <= (time.time() if now is None else now)


def renew(db: Db, holder: str, now: float | None = None) -> int:
    """Move this holder's leases forward (its locks, its pending plans): how many rows it holds."""
    until = lease_until(now)
    held = len(list(db.query("UPDATE locks SET lease_expires = ? WHERE lease_holder = ? RETURNING host",
                             [until, holder])))
    held += len(list(db.query("UPDATE plans SET lease_expires = ? WHERE lease_holder = ? AND state = ? "
                              "RETURNING id", [until, holder, PlanState.PENDING])))
    return held


def adopt_orphaned_plans(db: Db, holder: str, now: float | None = None) -> list[dict[str, Any]]:
    """Pending plans whose holder's lease ended become this holder's (they stay valid: an approval may still
    come); each row as it is after, for the caller to announce. Decided plans are never taken."""
    moment = time.time() if now is None else now
    return list(db.query("UPDATE plans SET lease_holder = ?, lease_expires = ? WHERE state = ? "
                         "AND lease_expires IS NOT NULL AND lease_expires <= ? RETURNING *",
                         [holder, lease_until(moment), PlanState.PENDING, moment]))


class Renewer:
    """A daemon thread calling ``renew_now`` every RENEW_EVERY_S until stopped; a failure is logged and
    retried at the next turn (the lease outlives two missed renewals)."""

    def __init__(self, renew_now: Callable[[], object]) -> None:
        self._renew_now = renew_now
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proofbot-leases", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(RENEW_EVERY_S):
            try:
                self._renew_now()
            except Exception as exc:  # the DB may be down for a moment: the next turn tries again
                log.warning("could not renew leases: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=RENEW_EVERY_S + 5)
