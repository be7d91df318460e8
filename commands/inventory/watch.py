"""``watch``: the inventory's schedule of re-verifies (target, every, channel, after, quiet hours, jitter), each
value parsed strictly and every problem said at its line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from commands.frozen import Frozen
from commands.inventory.schema import Invalid, model, rules
from commands.inventory.settings import Strict, matching

if TYPE_CHECKING:  # problems imports hosts, which holds the entries: the type only, to stay out of that cycle
    from zoneinfo import ZoneInfo

    from commands.inventory.problems import KeyPath, Problems

# 5m, 90s, 1h30m: units largest first, each at most once; no bare numbers (is 5 seconds or minutes?).
_DURATION = re.compile(r"(?:(?P<h>\d{1,4})h)?(?:(?P<m>\d{1,6})m)?(?:(?P<s>\d{1,8})s)?")
_QUIET = re.compile(r"(?P<start>\d{2}:\d{2})-(?P<end>\d{2}:\d{2}) (?P<zone>\S+)")
_CHANNEL = re.compile(r"[CG][A-Z0-9]{2,}")
MIN_EVERY = timedelta(seconds=30)  # a verify is a round trip per host: faster than this is a load, not a watch
DEFAULT_AFTER = 2


def parse_duration(written: str) -> timedelta:
    """``5m`` / ``90s`` / ``1h30m`` as a timedelta; anything else (a bare number, ``5 m``, ``5min``) is refused."""
    found = _DURATION.fullmatch(written)
    if not written or found is None:
        raise ValueError(f"not a duration: {written!r} (write e.g. 90s, 5m, 1h30m)")
    parts = {unit: int(value) for unit, value in found.groupdict().items() if value is not None}
    return timedelta(hours=parts.get("h", 0), minutes=parts.get("m", 0), seconds=parts.get("s", 0))


def _clock_time(written: str) -> time:
    hours, minutes = (int(part) for part in written.split(":"))
    if hours > 23 or minutes > 59:
        raise ValueError(f"not a time of day: {written!r} (00:00 to 23:59)")
    return time(hours, minutes)


@dataclass(frozen=True, eq=False, repr=False)  # Frozen's: the same, compiled once
class QuietHours(Frozen):
    """A daily window in a time zone, e.g. 22:00-07:00 Europe/Berlin (it may cross midnight)."""

    start: time
    end: time
    zone: ZoneInfo

    @classmethod
    def parse(cls, written: str) -> QuietHours:
        found = _QUIET.fullmatch(written)
        if found is None:
            raise ValueError(f"not quiet hours: {written!r} (write e.g. \"22:00-07:00 Europe/Berlin\")")
        start, end = _clock_time(found["start"]), _clock_time(found["end"])
        if start == end:
            raise ValueError(f"quiet hours {written!r} start and end at the same time")
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # with sysconfig ~2 ms: only for quiet hours written

        try:
            zone = ZoneInfo(found["zone"])
        except (ZoneInfoNotFoundError, ValueError, OSError):  # "Europe" is a directory of zones, not one
            raise ValueError(f"unknown time zone {found['zone']!r} (an IANA name, e.g. Europe/Berlin)") from None
        return cls(start, end, zone)

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M} {self.zone.key}"

    def contains(self, moment: datetime) -> bool:
        """Whether ``moment`` (aware) falls in the window, read on the zone's wall clock (DST included)."""
        local = moment.astimezone(self.zone).time()
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end  # across midnight


@model
class WatchEntry(Strict):
    """One ``watch`` entry as written; durations and quiet hours stay strings here, parsed by its checks."""

    target: str
    every: str
    channel: str
    after: int = field(default=DEFAULT_AFTER, metadata=rules(ge=1, le=100, strict=True))
    quiet: str | None = None
    # How far after its slot a run may start (random, per run): 500 hosts never all start at once.
    # Default: a tenth of `every`.
    jitter: str | None = None

    @property
    def interval(self) -> timedelta:
        return parse_duration(self.every)

    @property
    def spread(self) -> timedelta:
        """The jitter: as written, or a tenth of ``every``."""
        return parse_duration(self.jitter) if self.jitter is not None else self.interval / 10

    @property
    def quiet_hours(self) -> QuietHours | None:
        return QuietHours.parse(self.quiet) if self.quiet is not None else None


def _duration(value: str | None, _: object) -> str | None:
    if value is not None:
        parse_duration(value)
    return value


def _often_enough(value: str, _: object) -> str:
    if parse_duration(value) < MIN_EVERY:
        raise ValueError(f"every {value} is too often: at least {MIN_EVERY.seconds}s")
    return value


def _quiet(value: str | None, _: object) -> str | None:
    if value is not None:
        QuietHours.parse(value)
    return value


WatchEntry.checks = {"every": (_duration, _often_enough), "jitter": (_duration,), "quiet": (_quiet,),
                     "channel": (lambda value, _: matching(_CHANNEL, value, "not a Slack channel ID (C… or G…)"),)}


def parse_watch(problems: Problems, written: Any, hosts: set[str], groups: set[str]) -> tuple[WatchEntry, ...]:
    """The ``watch`` list; each bad entry is a problem at its line (and left out), so every one is said."""
    if written is None:
        return ()
    if not isinstance(written, list):
        problems.add(("watch",), "must be a list of entries, e.g. - {target: gpu, every: 5m, channel: C0123ABCD}")
        return ()
    entries: list[WatchEntry] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(written):
        where: KeyPath = ("watch", index)
        if not isinstance(raw, dict):
            problems.add(where, "must be a mapping: {target: …, every: …, channel: …}", key=f"watch[{index}]")
            continue
        try:
            entry = WatchEntry.model_validate(raw)
        except Invalid as exc:
            problems.add_validation(where, exc, WatchEntry)
            continue
        if entry.target not in hosts and entry.target not in groups:
            problems.add((*where, "target"), f"unknown host or group {entry.target!r}")
            continue
        if entry.spread >= entry.interval:
            problems.add((*where, "jitter"), f"jitter {entry.jitter} must be shorter than every {entry.every}")
            continue
        if entry.target in seen:
            problems.add((*where, "target"), f"{entry.target!r} is already watched by entry {seen[entry.target]}")
            continue
        seen[entry.target] = index
        entries.append(entry)
    return tuple(entries)
