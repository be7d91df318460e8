"""One way for test modules to start a lab: skip (or fail, where labs are required) with the tier's
reason, else hosts by scenario."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

from tests.lab import require_nspawn, require_root_netns, skip_or_fail
from tests.lab.common import BaseLab, Scenario
from tests.lab.nspawn import NspawnLab

LabT = TypeVar("LabT", bound=BaseLab)


@contextmanager
def running_lab(kind: type[LabT], hosts: Mapping[str, Scenario]) -> Iterator[LabT]:
    reason = require_nspawn() if issubclass(kind, NspawnLab) else require_root_netns()
    if reason:
        skip_or_fail(reason)
    with kind() as lab:
        lab.start(list(hosts), per_host=hosts)
        yield lab
