"""The fleet-wide deadline: one slow host, or slots held by other fleets (``limits.hosts``), never holds a fleet
operation past it. Derived from the inventory's ``fleet`` timeouts (docs/inventory.md "fleet deadline")."""

from __future__ import annotations

import math


def fleet_deadline_s(hosts: int, host_deadline_s: float, parallel: int) -> float:
    """``host_deadline_s * (rounds + 1)``: the rounds of ``parallel`` hosts the fleet needs if every host used its
    whole deadline, and one more for slots other fleets hold and connection set-up. A host not started by
    ``deadline - host_deadline_s`` is not started at all (it could not end in time): "could not check"."""
    rounds = max(1, math.ceil(hosts / max(1, parallel)))
    return host_deadline_s * (rounds + 1)


def not_reached_reason(deadline_s: float) -> str:
    """What a host whose turn never came says (a could-not-check, never a pass)."""
    return (f"could not check: fleet deadline of {deadline_s:g} s reached before this host's turn "
            "(its verify was never started; fleet.host_deadline_s times (rounds of fleet.max_parallel + 1))")
