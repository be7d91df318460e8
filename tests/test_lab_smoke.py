"""Smoke tests that prove the test lab itself: tier-2 namespace hosts, tier-3 systemd hosts
and the latency/fault proxy. Hosts are started once per module.
"""

from __future__ import annotations


